package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	dto "github.com/prometheus/client_model/go"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/placement"
)

// TestHolderLossRestoresR kills (kill -9) one of a shard's R = 3 holders
// among five storage nodes that keep nothing but their durability share
// and answer REQs from their own store only (lookup_peers = 0). The mesh
// must restore R: every shard the dead node held gets a third holder among
// the survivors (their `fleetmesh status --json`), and the shard's new
// holder serves, from its own store, every event of the shard published
// before the kill. The time from the kill to that is logged (recorded in
// docs/benchmarks/mesh.md), never asserted.
func TestHolderLossRestoresR(t *testing.T) {
	needBinary(t)
	cfg := nodeConfig(nil) + durableConfig + "lookup_peers = 0\n"
	const count = 5
	nodes := []*meshNode{startMeshNode(t, newHome(t, cfg))}
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
	before, err := placement.New(3, mesh.ShardCount, ids)
	if err != nil {
		t.Fatal(err)
	}
	const victim = 2
	survivors := slices.Delete(slices.Clone(ids), victim, victim+1)
	after, err := placement.New(3, mesh.ShardCount, survivors)
	if err != nil {
		t.Fatal(err)
	}
	index := func(p peer.ID) int { return slices.Index(ids, p) }
	share := authorWhere(t, func(s int) bool { return slices.Contains(before.Holders(s), ids[victim]) })
	shard := shardOfHex(t, share.pubHex)
	var heir int
	for _, p := range after.Holders(shard) {
		if !slices.Contains(before.Holders(shard), p) {
			heir = index(p)
		}
	}
	publisher := -1
	for _, p := range before.Holders(shard) {
		if i := index(p); i != victim && publisher < 0 {
			publisher = i
		}
	}

	for i, n := range nodes {
		waitMetric(t, n, fmt.Sprintf("node %d places over the five storage nodes", i), func(f map[string]*dto.MetricFamily) bool {
			v, ok := sample(f, "fleetmesh_mesh_storage_nodes", "", "")
			return ok && v == count
		})
	}
	waitDurable(t, nodes[victim], shard)
	var events []string
	for i := range 5 {
		events = append(events, publishAt(t, nodes[publisher], share, fmt.Sprint("held by three ", i)))
	}
	for _, p := range before.Holders(shard) {
		waitServed(t, fmt.Sprintf("holder %d before the kill", index(p)), nodes[index(p)], events, share.pubHex)
	}
	if byID, _, err := served(nodes[heir], events, share.pubHex); err != nil || len(byID) != 0 {
		t.Fatalf("the heir (node %d) serves %d events of a shard it does not hold yet (err %v)", heir, len(byID), err)
	}

	killed := time.Now()
	nodes[victim].kill()
	waitServed(t, fmt.Sprintf("the heir (node %d) after the kill", heir), nodes[heir], events, share.pubHex)
	restored := time.Since(killed)

	// Every shard the victim held has R holders again among the
	// survivors, by their own account.
	short := func() []int {
		held := map[int]int{}
		for i, n := range nodes {
			if i != victim {
				for _, s := range statusDurable(t, n) {
					held[s]++
				}
			}
		}
		var out []int
		for _, s := range before.Shards(ids[victim]) {
			if held[s] < 3 {
				out = append(out, s)
			}
		}
		return out
	}
	deadline := time.Now().Add(90 * time.Second)
	for s := short(); len(s) > 0; s = short() {
		if time.Now().After(deadline) {
			t.Fatalf("90 s after the kill, %d shards the victim held have fewer than 3 holders: %v", len(s), s)
		}
		time.Sleep(200 * time.Millisecond)
	}
	everywhere := time.Since(killed)
	t.Logf("R restored %.1f s after the kill: the heir of shard %d (node %d) held all %d events after %.1f s; every shard the victim held had 3 holders after %.1f s",
		everywhere.Seconds(), shard, heir, len(events), restored.Seconds(), everywhere.Seconds())
}

// statusDurable is the durable shards n reports in `fleetmesh status --json`.
func statusDurable(t *testing.T, n *meshNode) []int {
	t.Helper()
	out, errOut, err := cli(t, "status", "--home", n.home, "--json")
	if err != nil {
		t.Fatalf("fleetmesh status: %v\n%s", err, errOut)
	}
	var st struct {
		Shards struct {
			Durable []int `json:"durable"`
		} `json:"shards"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	return st.Shards.Durable
}
