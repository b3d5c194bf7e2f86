package mesh

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
)

func peerIDs(t testing.TB, n int) []peer.ID {
	t.Helper()
	out := make([]peer.ID, n)
	for i := range out {
		out[i] = newKey(t).PeerID()
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
			pl, err := NewPlacement(c.r, nodes)
			if err != nil {
				t.Fatal(err)
			}
			reversed := slices.Clone(nodes)
			slices.Reverse(reversed)
			again, err := NewPlacement(c.r, append(reversed, reversed[0]))
			if err != nil {
				t.Fatal(err)
			}
			held := map[peer.ID]int{}
			for s := range ShardCount {
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
			if total != ShardCount*min(c.r, c.n) {
				t.Fatalf("%d places in all, want %d", total, ShardCount*min(c.r, c.n))
			}

			joiner := peerIDs(t, 1)[0]
			joined, err := NewPlacement(c.r, append(slices.Clone(nodes), joiner))
			if err != nil {
				t.Fatal(err)
			}
			for s := range ShardCount {
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
			left, err := NewPlacement(c.r, nodes[1:])
			if err != nil {
				t.Fatal(err)
			}
			for s := range ShardCount {
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
		got, err := PlacementWeight(c.shard, id)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("weight of %s for shard %d = %#016x, want %#016x", key.DID(), c.shard, got, c.want)
		}
	}
}

func TestPlacementErrors(t *testing.T) {
	if _, err := NewPlacement(0, peerIDs(t, 2)); err == nil {
		t.Error("R = 0 accepted")
	}
	_, pub, err := crypto.GenerateSecp256k1Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	secp, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlacement(3, append(peerIDs(t, 2), secp)); err == nil {
		t.Error("a secp256k1 PeerID accepted")
	}
	if _, err := NewPlacement(3, nil); err != nil {
		t.Errorf("no nodes: %v", err)
	}
}

// signOffer signs n's descriptor with or without a storage offer.
func signOffer(t testing.TB, n *testNode, seq uint64, class descriptor.Class, storage bool) []byte {
	t.Helper()
	now := time.Now().Unix()
	d := descriptor.Descriptor{
		DID:       n.key.DID(),
		Class:     class,
		Seq:       seq,
		IssuedAt:  now,
		Expires:   now + 3600,
		Addresses: descriptor.Addresses{Libp2p: []string{n.p2pAddr()}},
	}
	if storage {
		d.Offers.Storage = &descriptor.StorageOffer{MaxBytes: 1 << 30, RetentionSeconds: 86400}
	}
	s, err := descriptor.Sign(n.key, d, descriptor.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return s.JWS
}

// durabilityConfig is testConfig with placement on and a short debounce.
func durabilityConfig() Config {
	cfg := testConfig()
	cfg.Durability = DurabilityConfig{Replication: 3, PlacementDebounce: 100 * time.Millisecond}
	return cfg
}

// agreed reports whether every node's placement is over exactly want and
// every node holds exactly the shards that placement gives it.
func agreed(nodes []*testNode, want []peer.ID) bool {
	want = slices.Clone(want)
	slices.Sort(want)
	for _, n := range nodes {
		pl := n.m.Placement()
		if !slices.Equal(pl.Nodes(), want) || !slices.Equal(n.m.Durable(), pl.Shards(n.h.ID())) {
			return false
		}
	}
	return true
}

// TestDurabilityPlacement runs 7 nodes that subscribe to nothing: five
// offer storage, one is a leaf that offers it (and must not count), one
// offers none. It checks that they agree on the placement, that every
// shard is held by exactly R = 3 nodes, that an event published anywhere
// reaches exactly its shard's holders, and that when the seventh node
// starts offering storage every node moves to the new placement, leaving
// the shards it no longer holds.
func TestDurabilityPlacement(t *testing.T) {
	const count, leaf, plain = 7, 5, 6
	_, nodes := newMockMesh(t, count, func(i int, nodes []*testNode) Config {
		cfg := durabilityConfig()
		if i > 0 {
			cfg.Bootstrap = []string{nodes[0].p2pAddr()}
		}
		return cfg
	}, func(int) Hooks {
		return Hooks{VerifyDescriptor: VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{}))}
	})
	var storage []peer.ID
	for i, n := range nodes {
		class := descriptor.ClassHome
		if i == leaf {
			class = descriptor.ClassLeaf
		}
		if err := n.m.SetLocalDescriptor(signOffer(t, n, 1, class, i != plain)); err != nil {
			t.Fatal(err)
		}
		if i != leaf && i != plain {
			storage = append(storage, n.h.ID())
		}
	}
	t0 := time.Now()
	eventually(t, 60*time.Second, "every node places over the five storage nodes and holds its shards", func() bool {
		return agreed(nodes, storage)
	})
	t.Logf("agreed in %v", time.Since(t0))
	checkHolders := func(r int) {
		t.Helper()
		for s := range ShardCount {
			var holding []peer.ID
			for _, n := range nodes {
				if n.m.HoldsDurable(s) {
					holding = append(holding, n.h.ID())
					if !slices.Contains(n.m.Subscribed(), s) {
						t.Fatalf("node %s holds shard %d but is not subscribed to it", n.h.ID(), s)
					}
				}
			}
			slices.Sort(holding)
			want := nodes[0].m.Placement().Holders(s)
			slices.Sort(want)
			if len(holding) != r || !slices.Equal(holding, want) {
				t.Fatalf("shard %d is held by %v, want the %d of the placement %v", s, holding, r, want)
			}
		}
		for _, n := range nodes {
			if !slices.Equal(n.m.Subscribed(), n.m.Durable()) {
				t.Fatalf("node %s subscribes to %v but holds %v", n.h.ID(), n.m.Subscribed(), n.m.Durable())
			}
			if st := n.m.Stats(); !slices.Equal(st.DurableShards, n.m.Durable()) || st.StorageNodes != len(n.m.Placement().Nodes()) {
				t.Fatalf("Stats of %s: %d durable shards over %d storage nodes, want %d over %d",
					n.h.ID(), len(st.DurableShards), st.StorageNodes, len(n.m.Durable()), len(n.m.Placement().Nodes()))
			}
		}
	}
	checkHolders(3)
	for _, i := range []int{leaf, plain} {
		if len(nodes[i].m.Durable()) != 0 {
			t.Fatalf("node %d holds %v without counting as a storage node", i, nodes[i].m.Durable())
		}
	}

	// Publish at every node, each on another author's shard.
	authors := authorsOnDistinctShards(t, count)
	index := map[peer.ID]int{}
	for i, n := range nodes {
		index[n.h.ID()] = i
	}
	holdersOf := func(shard int) []int {
		var out []int
		for _, p := range nodes[0].m.Placement().Holders(shard) {
			out = append(out, index[p])
		}
		return out
	}
	published := make([]*nostr.Event, len(authors))
	for i, a := range authors {
		eventually(t, 30*time.Second, fmt.Sprintf("the holders of shard %d form one GossipSub mesh that node %d reaches", a.shard, i), func() bool {
			return shardGraphConnected(t, nodes, holdersOf(a.shard), []int{i}, a.shard)
		})
		ev := a.event(t, 1, fmt.Sprint("durable note from node ", i))
		published[i] = ev
		if err := nodes[i].m.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		holders := holdersOf(a.shard)
		eventually(t, 20*time.Second, fmt.Sprintf("the event of node %d reaches the holders %v of shard %d", i, holders, a.shard), func() bool {
			for _, h := range holders {
				if h != i && !nodes[h].sink.has(ev.ID) {
					return false
				}
			}
			return true
		})
	}
	for i, n := range nodes {
		for j, ev := range published {
			if n.sink.has(ev.ID) && !slices.Contains(holdersOf(authors[j].shard), i) {
				t.Fatalf("node %d received the event of shard %d, which it does not hold", i, authors[j].shard)
			}
		}
	}

	t.Logf("published after %v", time.Since(t0))
	// The seventh node starts offering storage: everyone moves.
	if err := nodes[plain].m.SetLocalDescriptor(signOffer(t, nodes[plain], 2, descriptor.ClassHome, true)); err != nil {
		t.Fatal(err)
	}
	storage = append(storage, nodes[plain].h.ID())
	eventually(t, 60*time.Second, "every node places over the six storage nodes", func() bool {
		return agreed(nodes, storage)
	})
	checkHolders(3)
	t.Logf("moved after %v", time.Since(t0))
}
