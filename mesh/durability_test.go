package mesh

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/nostr"
)

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
		return Hooks{VerifyDescriptor: peerexchange.VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{}))}
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
