package mesh

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"fleetmesh.org/fleetmesh/nostr"
)

// shardGraphConnected reports whether the subscribers of shard, joined by
// their GossipSub mesh links (grafted peers), form one connected graph, and
// whether every publisher knows at least one of them: then a published
// event reaches every subscriber through the meshes.
func shardGraphConnected(t testing.TB, nodes []*testNode, subscribers []int, publishers []int, shard int) bool {
	t.Helper()
	if len(subscribers) == 0 {
		return true
	}
	index := map[string]int{}
	for _, i := range subscribers {
		index[string(nodes[i].h.ID())] = i
	}
	seen := map[int]bool{subscribers[0]: true}
	queue := []int{subscribers[0]}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, p := range nodes[i].m.mesh.list(Topic(shard)) {
			if j, ok := index[string(p)]; ok && !seen[j] {
				seen[j] = true
				queue = append(queue, j)
			}
		}
	}
	if len(seen) != len(subscribers) {
		return false
	}
	for _, i := range publishers {
		tp, err := nodes[i].m.topic(shard)
		if err != nil {
			t.Fatal(err)
		}
		if len(tp.ListPeers()) == 0 {
			return false
		}
	}
	return true
}

const secretTag = "secret"

// refuseSecret is a replication policy: events tagged ["t","secret"] stay
// home.
func refuseSecret(ev *nostr.Event) (bool, string) {
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == "t" && tag[1] == secretTag {
			return false, "tagged secret"
		}
	}
	return true, ""
}

// TestMesh50 runs one in-memory mesh of 50 nodes and checks, in turn:
// propagation of events to exactly the nodes subscribed to their author's
// shard; the replication policy refusing in both directions; and a node
// restarted from its persisted address book, with no bootstrap peer,
// reconnecting and receiving again.
func TestMesh50(t *testing.T) {
	const count = 50
	authors := authorsOnDistinctShards(t, 3)
	a, b, c := authors[0].shard, authors[1].shard, authors[2].shard
	shardsOf := func(i int) []int {
		switch i % 4 {
		case 0:
			return []int{a}
		case 1:
			return []int{b}
		case 2:
			return []int{a, c}
		}
		return nil // subscribes to nothing: must receive nothing
	}
	hasPolicy := func(i int) bool { return i%5 == 0 }
	bookDirs := make([]string, count)
	for i := range bookDirs {
		bookDirs[i] = t.TempDir()
	}
	mn, nodes := newMockMesh(t, count, func(i int, nodes []*testNode) Config {
		cfg := testConfig()
		cfg.AddrBookDir = bookDirs[i]
		return cfg
	}, func(i int) Hooks {
		if hasPolicy(i) {
			return Hooks{Policy: refuseSecret}
		}
		return Hooks{}
	})
	subscribersOf := func(shard int) []int {
		var out []int
		for i := range nodes {
			if slices.Contains(shardsOf(i), shard) {
				out = append(out, i)
			}
		}
		return out
	}
	// Discovery has its own tests; here the test wires the graph so that it
	// measures replication alone: the subscribers of each shard in a ring
	// (so each shard's subscribers are connected whatever the chance), three
	// random links per node and a link from each node to a subscriber of
	// each shard.
	connect := func(i, j int) {
		if i == j || nodes[i].h.Network().Connectedness(nodes[j].h.ID()) == network.Connected {
			return
		}
		if _, err := mn.ConnectPeers(nodes[i].h.ID(), nodes[j].h.ID()); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []int{a, b, c} {
		subs := subscribersOf(s)
		for k := range subs {
			connect(subs[k], subs[(k+1)%len(subs)])
		}
	}
	for i := range nodes {
		for range 3 {
			connect(i, rand.IntN(count))
		}
		// Any node may publish on any shard: give each a way in. (Beyond
		// direct peers, nodes find a shard's subscribers through the DHT.)
		for _, s := range []int{a, b, c} {
			subs := subscribersOf(s)
			connect(i, subs[rand.IntN(len(subs))])
		}
	}
	for i, n := range nodes {
		if err := n.m.Subscribe(shardsOf(i)...); err != nil {
			t.Fatal(err)
		}
	}
	waitMeshes := func(publishers []int) {
		t.Helper()
		eventually(t, 30*time.Second, "every shard's subscribers connected in GossipSub", func() bool {
			for _, s := range []int{a, b, c} {
				if !shardGraphConnected(t, nodes, subscribersOf(s), publishers, s) {
					return false
				}
			}
			return true
		})
	}

	t.Run("propagation", func(t *testing.T) {
		publishers := []int{rand.IntN(count), rand.IntN(count), rand.IntN(count)}
		waitMeshes(publishers)
		// Bytes received by nodes that subscribe to nothing and publish
		// nothing: the sharding claim is that they see none of the traffic.
		idle := map[int]uint64{}
		for i := range nodes {
			if len(shardsOf(i)) == 0 && !slices.Contains(publishers, i) {
				idle[i] = nodes[i].m.Stats().RPCBytesReceived
			}
		}
		var events []*nostr.Event
		publishedBy := map[[32]byte]int{}
		for k, au := range authors {
			for j := range 2 {
				ev := au.event(t, 1, fmt.Sprintf("note %d from author %d", j, k))
				if err := nodes[publishers[k]].m.Publish(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
				events = append(events, ev)
				// The publisher's own sink is not called: its relay holds it.
				publishedBy[ev.ID] = publishers[k]
			}
		}
		eventually(t, 20*time.Second, "every subscribed node has every event of its shards", func() bool {
			for i, n := range nodes {
				for _, ev := range events {
					if slices.Contains(shardsOf(i), ShardOf(ev.PubKey)) && i != publishedBy[ev.ID] && !n.sink.has(ev.ID) {
						return false
					}
				}
			}
			return true
		})
		for i, n := range nodes {
			for _, ev := range events {
				if !slices.Contains(shardsOf(i), ShardOf(ev.PubKey)) && n.sink.has(ev.ID) {
					t.Errorf("node %d (shards %v) received an event of shard %d", i, shardsOf(i), ShardOf(ev.PubKey))
				}
			}
		}
		for i, before := range idle {
			if got := nodes[i].m.Stats().RPCBytesReceived - before; got >= uint64(len(events[0].AppendJSON(nil))) {
				t.Errorf("node %d subscribes to nothing yet received %d GossipSub bytes while %d events propagated", i, got, len(events))
			}
		}
	})

	t.Run("policy", func(t *testing.T) {
		secret := authors[0].event(t, 1, "stays home")
		secret.Tags = nostr.Tags{{"t", secretTag}}
		if err := authors[0].sk.Sign(secret); err != nil {
			t.Fatal(err)
		}
		// Outbound: a node with the policy refuses to publish it.
		err := nodes[0].m.Publish(context.Background(), secret)
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("Publish of a refused event = %v, want ErrRefused", err)
		}
		if got := nodes[0].m.Stats().Refused[Outbound]["tagged secret"]; got != 1 {
			t.Fatalf("outbound refusals = %d, want 1", got)
		}
		// Inbound: a node without the policy publishes it; subscribers
		// without the policy get it, those with it refuse it and count.
		from := 1
		waitMeshes([]int{from})
		if err := nodes[from].m.Publish(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "every subscriber either has the event or counted a refusal", func() bool {
			for _, i := range subscribersOf(a) {
				if hasPolicy(i) {
					if nodes[i].m.Stats().Refused[Inbound]["tagged secret"] == 0 {
						return false
					}
				} else if !nodes[i].sink.has(secret.ID) {
					return false
				}
			}
			return true
		})
		for _, i := range subscribersOf(a) {
			if hasPolicy(i) && nodes[i].sink.has(secret.ID) {
				t.Errorf("node %d has the policy but its sink got the refused event", i)
			}
		}
	})

	t.Run("restart from address book", func(t *testing.T) {
		// Node 2 (shards a and c) goes down and comes back with the same key
		// and home, no bootstrap peer and no help from the test in
		// connecting.
		const r = 2
		old := nodes[r]
		knew := old.h.Network().Peers()
		if err := old.m.Close(); err != nil {
			t.Fatal(err)
		}
		old.m = nil
		for _, n := range nodes {
			if n != old {
				if err := mn.UnlinkPeers(old.h.ID(), n.h.ID()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := old.h.Close(); err != nil {
			t.Fatal(err)
		}
		back := addHost(t, mn, old.key, old.addr)
		for _, n := range nodes {
			if n != old {
				if _, err := mn.LinkPeers(back.h.ID(), n.h.ID()); err != nil {
					t.Fatal(err)
				}
			}
		}
		cfg := testConfig()
		cfg.AddrBookDir = bookDirs[r]
		if cfg.Bootstrap != nil {
			t.Fatal("the restarted node must have no bootstrap peer")
		}
		back.start(t, cfg, Hooks{})
		nodes[r] = back
		if err := back.m.Subscribe(shardsOf(r)...); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the restarted node reconnects to every peer it knew", func() bool {
			for _, p := range knew {
				if back.h.Network().Connectedness(p) != network.Connected {
					return false
				}
			}
			return true
		})
		waitMeshes([]int{0})
		ev := authors[2].event(t, 1, "after the restart")
		if err := nodes[0].m.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the restarted node receives a new event", func() bool {
			return back.sink.has(ev.ID)
		})
	})
}
