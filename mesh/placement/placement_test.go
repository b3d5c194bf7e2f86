package placement

import (
	"crypto/ed25519"
	"fmt"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/identity"
)

// shards is the mesh's author shard count (spec/mesh-topics.md), which
// the spec's vectors and the mesh place over.
const shards = 256

func peerIDs(t testing.TB, n int) []peer.ID {
	t.Helper()
	out := make([]peer.ID, n)
	for i := range out {
		k, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = k.PeerID()
	}
	return out
}

// TestPlacementRule checks the rule's properties on random node sets:
// every shard has min(R, N) distinct holders drawn from the nodes; the
// result does not depend on the order the nodes are listed in; a node
// joining takes at most one place per shard and moves nothing else; a
// node leaving moves only the shards it held.
func TestPlacementRule(t *testing.T) {
	cases := []struct{ r, n int }{
		{3, 1}, {3, 2}, {3, 3}, {3, 4}, {3, 10}, {1, 5}, {5, 40},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("R%d_N%d", c.r, c.n), func(t *testing.T) {
			nodes := peerIDs(t, c.n)
			pl, err := New(c.r, shards, nodes)
			if err != nil {
				t.Fatal(err)
			}
			reversed := slices.Clone(nodes)
			slices.Reverse(reversed)
			again, err := New(c.r, shards, append(reversed, reversed[0]))
			if err != nil {
				t.Fatal(err)
			}
			held := map[peer.ID]int{}
			for s := range shards {
				h := pl.Holders(s)
				if len(h) != min(c.r, c.n) {
					t.Fatalf("shard %d has %d holders, want %d", s, len(h), min(c.r, c.n))
				}
				if !slices.Equal(h, again.Holders(s)) {
					t.Fatalf("shard %d: holders depend on the order of the nodes: %v and %v", s, h, again.Holders(s))
				}
				for i, p := range h {
					if !slices.Contains(nodes, p) || slices.Contains(h[:i], p) {
						t.Fatalf("shard %d: holders %v are not distinct nodes of the set", s, h)
					}
					held[p]++
				}
			}
			total := 0
			for _, p := range nodes {
				if got := len(pl.Shards(p)); got != held[p] {
					t.Fatalf("Shards(%s) lists %d shards, Holders says %d", p, got, held[p])
				}
				total += held[p]
			}
			if total != shards*min(c.r, c.n) {
				t.Fatalf("%d places in all, want %d", total, shards*min(c.r, c.n))
			}

			joiner := peerIDs(t, 1)[0]
			joined, err := New(c.r, shards, append(slices.Clone(nodes), joiner))
			if err != nil {
				t.Fatal(err)
			}
			for s := range shards {
				before, after := pl.Holders(s), joined.Holders(s)
				kept := 0
				for _, p := range after {
					if p != joiner && !slices.Contains(before, p) {
						t.Fatalf("shard %d: %s took a place when %s joined", s, p, joiner)
					}
					if slices.Contains(before, p) {
						kept++
					}
				}
				if kept < len(before)-1 {
					t.Fatalf("shard %d: a join moved %d holders", s, len(before)-kept)
				}
			}
			if c.n < 2 {
				return
			}
			leaver := nodes[0]
			left, err := New(c.r, shards, nodes[1:])
			if err != nil {
				t.Fatal(err)
			}
			for s := range shards {
				before, after := pl.Holders(s), left.Holders(s)
				if !slices.Contains(before, leaver) && !slices.Equal(before, after) {
					t.Fatalf("shard %d: %s left, not holding it, and the holders moved from %v to %v", s, leaver, before, after)
				}
			}
		})
	}
}

// TestPlacementWeightVector pins the rule to the vector in
// spec/mesh-placement.md: the did:key spec's all-zero-seed key (public key
// 3b6a27bc…da29). The values were computed apart from this code, with
// Python's hashlib over the bytes the spec lists.
func TestPlacementWeightVector(t *testing.T) {
	key, err := identity.KeyFromSeed(make([]byte, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	id := key.PeerID()
	for _, c := range []struct {
		shard int
		want  uint64
	}{
		{0, 0x6f48c259547dce5b},
		{255, 0x9b293c5f0d8426a1},
	} {
		got, err := Weight(c.shard, id)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("weight of %s for shard %d = %#016x, want %#016x", key.DID(), c.shard, got, c.want)
		}
	}
}

// TestPlacementErrors checks what New and Weight refuse, and that no
// nodes and the zero Placement place nothing.
func TestPlacementErrors(t *testing.T) {
	_, pub, err := crypto.GenerateSecp256k1Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	secp, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		r, shards int
		nodes     []peer.ID
		ok        bool
	}{
		{"R = 0", 0, shards, peerIDs(t, 2), false},
		{"negative R", -1, shards, peerIDs(t, 2), false},
		{"no shards", 3, 0, peerIDs(t, 2), false},
		{"more shards than a uint16 names", 3, MaxShards + 1, peerIDs(t, 2), false},
		{"a secp256k1 PeerID", 3, shards, append(peerIDs(t, 2), secp), false},
		{"no nodes", 3, shards, nil, true},
		{"one shard", 3, 1, peerIDs(t, 4), true},
	}
	for _, tt := range tests {
		pl, err := New(tt.r, tt.shards, tt.nodes)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok %v", tt.name, err, tt.ok)
			continue
		}
		if tt.ok && len(pl.Holders(tt.shards)) != 0 {
			t.Errorf("%s: shard %d, past the last, has holders", tt.name, tt.shards)
		}
	}
	var zero Placement
	if zero.Replication() != 0 || len(zero.Nodes()) != 0 || len(zero.Holders(0)) != 0 || len(zero.Shards(peerIDs(t, 1)[0])) != 0 {
		t.Error("the zero Placement places something")
	}
	for _, s := range []int{-1, MaxShards} {
		if _, err := Weight(s, peerIDs(t, 1)[0]); err == nil {
			t.Errorf("Weight of shard %d accepted", s)
		}
	}
	if _, err := Weight(0, secp); err == nil {
		t.Error("Weight of a secp256k1 PeerID accepted")
	}
}
