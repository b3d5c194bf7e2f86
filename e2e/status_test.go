package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestStatusAndMeshMetrics runs two mesh nodes, the second also given a
// bootstrap peer that does not answer, and reads the second with
// `fleetmesh status --home DIR [--json]` and /metrics: its identity,
// class, reachability and peers, the unreachable bootstrap peer among its
// recent errors, fleetmesh_mesh_peers by class and transport, and no
// metric labelled by peer or shard. Once the node has stopped, status says
// no node runs there.
func TestStatusAndMeshMetrics(t *testing.T) {
	needBinary(t)
	cfg := nodeConfig(nil) + meshConfig
	a := startMeshNode(t, newHome(t, cfg))
	idOut, _, err := cli(t, "id", "--home", newHome(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	var ghost struct {
		PeerID string `json:"peer_id"`
	}
	if err := json.Unmarshal([]byte(idOut), &ghost); err != nil {
		t.Fatalf("fleetmesh id printed %q: %v", idOut, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", ln.Addr().(*net.TCPAddr).Port, ghost.PeerID)
	ln.Close()
	// Events a holds before b exists reach b by a catch-up, which its
	// status reports.
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		publishAt(t, a, u, randomContent(fmt.Sprint("before b ", i)))
	}
	b := startMeshNode(t, newHome(t, cfg), a.mesh, dead)

	var st struct {
		DID          string `json:"did"`
		Class        string `json:"class"`
		Reachability string `json:"reachability"`
		Peers        int    `json:"peers"`
		Sync         struct {
			Active bool  `json:"active"`
			Moved  int64 `json:"moved"`
			Total  int64 `json:"estimated_total"`
		} `json:"sync"`
		Errors []struct {
			Message string            `json:"message"`
			Attrs   map[string]string `json:"attrs"`
		} `json:"errors"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, errOut, err := cli(t, "status", "--home", b.home, "--json")
		if err != nil {
			t.Fatalf("fleetmesh status --json: %v\n%s\n%s", err, errOut, b.output())
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("fleetmesh status --json printed %q: %v", out, err)
		}
		logged := false
		for _, e := range st.Errors {
			logged = logged || (e.Message == "mesh: bootstrap peer unreachable" && strings.Contains(e.Attrs["addrs"], strings.Split(dead, "/p2p/")[0]))
		}
		if st.Peers >= 1 && logged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed a peer and the unreachable bootstrap peer: %s\n%s", out, b.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st.DID != b.did || st.Class != "home" || st.Reachability == "" {
		t.Fatalf("status: did %q class %q reachability %q; want did %q, class home and a reachability", st.DID, st.Class, st.Reachability, b.did)
	}

	// The 3 events went from a to b in a catch-up that a's sessions
	// (pushing) or b's (fetching) ran: one of them reports it, finished.
	for {
		var moved int64
		var lines []string
		for _, n := range []*meshNode{a, b} {
			out, _, err := cli(t, "status", "--home", n.home, "--json")
			if err != nil {
				t.Fatal(err)
			}
			var s struct {
				Sync struct {
					Active bool  `json:"active"`
					Moved  int64 `json:"moved"`
				} `json:"sync"`
			}
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatal(err)
			}
			if !s.Sync.Active {
				moved += s.Sync.Moved
			}
			text, _, _ := cli(t, "status", "--home", n.home)
			for _, l := range strings.Split(text, "\n") {
				if strings.HasPrefix(l, "sync ") {
					lines = append(lines, l)
				}
			}
		}
		if moved >= 3 && len(lines) == 2 {
			t.Logf("catch-up as status reports it: %q", lines)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no finished catch-up of the 3 events in either node's status (moved %d): %q", moved, lines)
		}
		time.Sleep(200 * time.Millisecond)
	}

	text, _, err := cli(t, "status", "--home", b.home)
	if err != nil || !strings.Contains(text, b.did) || !strings.Contains(text, "peers ") || !strings.Contains(text, "bootstrap peer unreachable") {
		t.Fatalf("fleetmesh status: %v\n%s", err, text)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fams, err := metrics(ctx, b.node)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sample(fams, "fleetmesh_mesh_peers", "transport", "tcp"); !ok || v < 1 {
		t.Fatalf("fleetmesh_mesh_peers{transport=\"tcp\"} = %v (present %v), want at least 1", v, ok)
	}
	for _, name := range []string{"fleetmesh_mesh_gossipsub_bytes_total", "fleetmesh_mesh_sync_sessions_total", "fleetmesh_mesh_sync_bytes_total",
		"fleetmesh_mesh_lookups_total", "fleetmesh_mesh_lookup_dials_total", "fleetmesh_mesh_shards_below_replication",
		"fleetmesh_mesh_address_book_peers", "fleetmesh_mesh_reachability", "fleetmesh_mesh_relay_reservations_held"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "fleetmesh_mesh_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer" || l.GetName() == "shard" {
					t.Errorf("%s has a label per %s: %v", name, l.GetName(), labels(m))
				}
			}
		}
	}

	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := cli(t, "status", "--home", b.home); err == nil || !strings.Contains(errOut, "fleetmesh run --home") {
		t.Fatalf("status of a stopped node: err %v\nstdout %s\nstderr %s", err, out, errOut)
	}
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// waitDurable polls `fleetmesh status --json` of n until n holds shard for
// durability (shards are not a metric label: their number is unbounded
// for a scraper).
func waitDurable(t *testing.T, n *meshNode, shard int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, errOut, err := cli(t, "status", "--home", n.home, "--json")
		var st struct {
			Shards struct {
				Durable []int `json:"durable"`
			} `json:"shards"`
		}
		if err == nil && json.Unmarshal([]byte(out), &st) == nil && slices.Contains(st.Shards.Durable, shard) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not hold shard %d for durability within 90s: %v %s\n%s", n.url, shard, err, errOut, n.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
