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
		plan := planDurableSync(pl, self, held, max, nil)
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
	if plan := planDurableSync(pl, nodes[0], nil, 8, nil); len(plan) != 0 {
		t.Fatalf("a node holding nothing plans %d sessions", len(plan))
	}
	alone, err := placement.New(3, mesh.ShardCount, []peer.ID{self})
	if err != nil {
		t.Fatal(err)
	}
	if plan := planDurableSync(alone, self, alone.Shards(self), 8, nil); len(plan) != 0 {
		t.Fatalf("the only storage node plans %d sessions", len(plan))
	}
}

// TestPlanDurableSyncPrefersStanding checks that among co-holders sharing
// as many shards the one with standing is repaired from first, and that
// standing never outweighs coverage (spec/standing.md "Use").
func TestPlanDurableSyncPrefersStanding(t *testing.T) {
	var nodes []peer.ID
	for range 12 {
		nodes = append(nodes, peerID(t))
	}
	pl, err := placement.New(3, mesh.ShardCount, nodes)
	if err != nil {
		t.Fatal(err)
	}
	self := nodes[0]
	held := pl.Shards(self)
	shared := map[peer.ID]int{}
	for _, s := range held {
		for _, p := range pl.Holders(s) {
			if p != self {
				shared[p]++
			}
		}
	}
	most, least := peer.ID(""), peer.ID("")
	for p, n := range shared {
		if most == "" || n > shared[most] || (n == shared[most] && p < most) {
			most = p
		}
		if least == "" || n < shared[least] || (n == shared[least] && p < least) {
			least = p
		}
	}
	if shared[least] == shared[most] {
		t.Skip("every co-holder shares as many shards; no ordering to test")
	}
	for _, tc := range []struct {
		name    string
		trusted peer.ID
		want    func(peer.ID) bool
	}{
		{"the trusted co-holder shares most", most, func(p peer.ID) bool { return p == most }},
		{"coverage outweighs standing", least, func(p peer.ID) bool { return shared[p] == shared[most] }},
	} {
		prefer := func(p peer.ID) bool { return p == tc.trusted }
		for range 50 {
			plan := planDurableSync(pl, self, held, 1, prefer)
			if len(plan) != 1 {
				t.Fatalf("%s: %d sessions, want 1", tc.name, len(plan))
			}
			if !tc.want(plan[0].peer) {
				t.Fatalf("%s: first session with %s (shares %d; most shared %d)", tc.name, plan[0].peer, shared[plan[0].peer], shared[most])
			}
		}
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
