package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/placement"
)

// durableConfig is a node that keeps nothing but its durability share
// (R = 3), with the DHT answering queries on loopback so that content
// routing has servers, and short intervals.
const durableConfig = `
[mesh]
sync_interval = "2s"
maintain_interval = "1s"
subscribe = []
replication = 3
dht = "server"
`

// metrics scrapes a node's /metrics.
func metrics(ctx context.Context, n *node) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.httpURL()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// sample is the value of the gauge or counter name in fams: the sum of its
// samples when label is empty, else of the samples whose label has value.
func sample(fams map[string]*dto.MetricFamily, name, label, value string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	var sum float64
	var found bool
	for _, m := range f.GetMetric() {
		match := label == ""
		for _, l := range m.GetLabel() {
			match = match || (l.GetName() == label && l.GetValue() == value)
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			sum, found = sum+m.GetGauge().GetValue(), true
		case m.Counter != nil:
			sum, found = sum+m.GetCounter().GetValue(), true
		}
	}
	return sum, found
}

// waitMetric polls n's /metrics until ok holds.
func waitMetric(t *testing.T, n *meshNode, what string, ok func(map[string]*dto.MetricFamily) bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fams, err := metrics(ctx, n.node)
		cancel()
		if err == nil && ok(fams) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 90s at %s (last error %v)\n%s", what, n.url, err, n.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// served asks n for ids, then for the author's events, and returns the
// ids it served by id and the ids it served by author.
func served(n *meshNode, ids []string, author string) (byID, byAuthor map[string]bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	byID, err = fetchIDs(ctx, n.url, ids, 100)
	if err != nil {
		return nil, nil, err
	}
	evs, err := query(ctx, n.url, map[string]any{"authors": []string{author}, "limit": 100})
	if err != nil {
		return nil, nil, err
	}
	byAuthor = map[string]bool{}
	for _, e := range evs {
		byAuthor[e.ID] = true
	}
	return byID, byAuthor, nil
}

// waitServed polls n until it serves every one of ids both by id and by
// author.
func waitServed(t *testing.T, what string, n *meshNode, ids []string, author string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		byID, byAuthor, err := served(n, ids, author)
		all := err == nil
		for _, id := range ids {
			all = all && byID[id] && byAuthor[id]
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s serves %d of %d events by id and %d by author (err %v)\n%s", what, n.url, len(byID), len(ids), len(byAuthor), err, n.output())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestDiskLoss is the disk-loss test, on five node processes that
// keep nothing but their durability share (R = 3):
//
//  1. events of an author whose shard the victim holds are published at
//     other nodes, with events of a second author whose shard it does not
//     hold;
//  2. the victim is stopped and its data directory (the store) deleted;
//     every other node still serves the first author's events, by id and
//     by author;
//  3. the victim is started again, with its key: it re-syncs its share
//     from the shard's other holders. Then every other node is stopped, so
//     that what the victim serves can come from nothing but its own store:
//     it serves all of the first author's events and none of the second's,
//     which is not its share.
//
// The key is kept because it is the node's identity, and the placement
// follows the identity: with its key the node returns as the same storage
// node and holds the same shards. A new key would make it a new node,
// holding other shards, while the old identity kept counting in every
// node's placement until its descriptor expired, one holder short for its
// shards all that time.
func TestDiskLoss(t *testing.T) {
	needBinary(t)
	cfg := nodeConfig(nil) + durableConfig
	const count = 5
	var nodes []*meshNode
	nodes = append(nodes, startMeshNode(t, newHome(t, cfg)))
	for range count - 1 {
		nodes = append(nodes, startMeshNode(t, newHome(t, cfg), nodes[0].mesh))
	}
	var ids []peer.ID
	for i, n := range nodes {
		p, err := identity.PeerIDFromDID(n.did)
		if err != nil {
			t.Fatalf("node %d printed did %q: %v", i, n.did, err)
		}
		ids = append(ids, p)
	}
	// The rule of spec/mesh-placement.md, computed here as any node does.
	pl, err := placement.New(3, mesh.ShardCount, ids)
	if err != nil {
		t.Fatal(err)
	}
	const victim = 1
	holds := func(shard int) bool { return slices.Contains(pl.Holders(shard), ids[victim]) }
	share := authorWhere(t, holds)
	other := authorWhere(t, func(s int) bool { return !holds(s) })
	shareShard := shardOfHex(t, share.pubHex)

	for i, n := range nodes {
		waitMetric(t, n, fmt.Sprintf("node %d places over the five storage nodes", i), func(f map[string]*dto.MetricFamily) bool {
			v, ok := sample(f, "fleetmesh_mesh_storage_nodes", "", "")
			return ok && v == count
		})
	}
	waitDurable(t, nodes[victim], shareShard)

	var mine, theirs []string
	for i := range 6 {
		at := nodes[[]int{0, 2, 3, 4}[i%4]]
		mine = append(mine, publishAt(t, at, share, fmt.Sprint("durable note ", i)))
		theirs = append(theirs, publishAt(t, at, other, fmt.Sprint("not the victim's share ", i)))
	}
	for i, n := range nodes {
		waitServed(t, fmt.Sprintf("before the loss, node %d", i), n, mine, share.pubHex)
	}

	v := nodes[victim]
	if err := v.stop(); err != nil {
		t.Fatalf("stop the victim: %v\n%s", err, v.output())
	}
	if err := os.RemoveAll(filepath.Join(v.home, "data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(v.home, "node.key")); err != nil {
		t.Fatalf("the key must survive the loss: %v", err)
	}
	for i, n := range nodes {
		if i != victim {
			waitServed(t, fmt.Sprintf("with the victim's disk gone, node %d", i), n, mine, share.pubHex)
		}
	}

	nodes[victim] = startMeshNode(t, v.home, nodes[0].mesh)
	v = nodes[victim]
	// The restarted process counts from zero: what it stores is what it
	// re-synced.
	waitMetric(t, v, "the victim stores its share again", func(f map[string]*dto.MetricFamily) bool {
		n, ok := sample(f, "fleetmesh_relay_events_total", "result", "stored")
		return ok && n >= float64(len(mine))
	})
	for i, n := range nodes {
		if i != victim {
			if err := n.stop(); err != nil {
				t.Fatalf("stop node %d: %v\n%s", i, err, n.output())
			}
		}
	}
	byID, byAuthor, err := served(v, mine, share.pubHex)
	if err != nil {
		t.Fatalf("alone, the victim: %v\n%s", err, v.output())
	}
	for _, id := range mine {
		if !byID[id] || !byAuthor[id] {
			t.Fatalf("alone, the victim serves %d of %d events of its share by id and %d by author\n%s", len(byID), len(mine), len(byAuthor), v.output())
		}
	}
	byID, _, err = served(v, theirs, other.pubHex)
	if err != nil {
		t.Fatal(err)
	}
	if len(byID) != 0 {
		t.Fatalf("alone, the victim serves %d events of a shard it does not hold", len(byID))
	}
}

// authorWhere makes users until one's shard satisfies ok.
func authorWhere(t *testing.T, ok func(shard int) bool) *user {
	t.Helper()
	for range 10_000 {
		u, err := newUser()
		if err != nil {
			t.Fatal(err)
		}
		if ok(shardOfHex(t, u.pubHex)) {
			return u
		}
	}
	t.Fatal("no author on a wanted shard")
	return nil
}

func shardOfHex(t *testing.T, pubHex string) int {
	t.Helper()
	b, err := hex.DecodeString(pubHex)
	if err != nil || len(b) != 32 {
		t.Fatalf("pubkey %q", pubHex)
	}
	return mesh.ShardOf([32]byte(b))
}
