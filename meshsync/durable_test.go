package meshsync

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/placement"
	"fleetmesh.org/fleetmesh/nostr"
)

// TestPlanDurableSync checks the choice of co-holders for one round.
func TestPlanDurableSync(t *testing.T) {
	var nodes []peer.ID
	for range 9 {
		nodes = append(nodes, peerID(t))
	}
	pl, err := placement.New(3, mesh.ShardCount, nodes)
	if err != nil {
		t.Fatal(err)
	}
	self := nodes[0]
	held := pl.Shards(self)
	for _, max := range []int{0, 1, 2, 100} {
		plan := planDurableSync(pl, self, held, max)
		if len(plan) > max {
			t.Fatalf("max %d: %d sessions", max, len(plan))
		}
		covered := map[int]bool{}
		for _, s := range plan {
			if s.peer == self {
				t.Fatalf("max %d: a session with itself", max)
			}
			for _, sh := range s.shards {
				if !slices.Contains(held, sh) || !slices.Contains(pl.Holders(sh), s.peer) {
					t.Fatalf("max %d: session with %s over shard %d, which the two do not both hold", max, s.peer, sh)
				}
				covered[sh] = true
			}
		}
		if max == 100 && len(covered) != len(held) {
			t.Fatalf("unbounded plan covers %d of %d held shards", len(covered), len(held))
		}
	}
	if plan := planDurableSync(pl, nodes[0], nil, 8); len(plan) != 0 {
		t.Fatalf("a node holding nothing plans %d sessions", len(plan))
	}
	alone, err := placement.New(3, mesh.ShardCount, []peer.ID{self})
	if err != nil {
		t.Fatal(err)
	}
	if plan := planDurableSync(alone, self, alone.Shards(self), 8); len(plan) != 0 {
		t.Fatalf("the only storage node plans %d sessions", len(plan))
	}
}

func peerID(t *testing.T) peer.ID {
	t.Helper()
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PeerID()
}

// TestTakesAll checks which filters make durable sessions redundant.
func TestTakesAll(t *testing.T) {
	cases := []struct {
		json string
		want bool
	}{
		{`{}`, true},
		{`{"kinds":[1]}`, false},
		{`{"authors":[]}`, false},
		{`{"since":1}`, false},
		{`{"limit":10}`, false},
		{`{"#t":["x"]}`, false},
	}
	for _, c := range cases {
		var f nostr.Filter
		if err := json.Unmarshal([]byte(c.json), &f); err != nil {
			t.Fatal(err)
		}
		if got := takesAll(f); got != c.want {
			t.Errorf("takesAll(%s) = %v, want %v", c.json, got, c.want)
		}
	}
}
