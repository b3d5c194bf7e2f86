package mesh

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/protocol"
)

// TestDHTDiscovery starts 10 nodes that know only node 0, with peer
// exchange off, and checks that the /fleetmesh DHT spreads them (routing
// tables hold more than the bootstrap peer) and that two nodes subscribed
// to the same shard, neither of which was told about the other, find each
// other through the DHT and replicate an event.
func TestDHTDiscovery(t *testing.T) {
	const count = 10
	_, nodes := newMockMesh(t, count, func(i int, nodes []*testNode) Config {
		cfg := testConfig()
		cfg.DHT = DHTServer
		// Few connections wanted, so that peers beyond the bootstrap node
		// come from DHT lookups, not from dialling everything remembered.
		cfg.ConnLowWater = 1
		if i > 0 {
			cfg.Bootstrap = []string{nodes[0].p2pAddr()}
		}
		return cfg
	}, func(int) Hooks { return Hooks{} })
	want := protocol.ID(DHTProtocolPrefix + "/kad/1.0.0")
	if !slices.Contains(nodes[0].h.Mux().Protocols(), want) {
		t.Fatalf("node 0 does not serve %s: %v", want, nodes[0].h.Mux().Protocols())
	}
	eventually(t, 30*time.Second, "every routing table holds peers beyond the bootstrap node", func() bool {
		for _, n := range nodes {
			if n.m.dht.RoutingTable().Size() < 3 {
				return false
			}
		}
		return true
	})

	au := newAuthor(t)
	x, y := nodes[3], nodes[7]
	for _, n := range []*testNode{x, y} {
		if err := n.m.Subscribe(au.shard); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the two subscribers find each other through the DHT and graft", func() bool {
		return slices.Contains(x.m.mesh.list(Topic(au.shard)), y.h.ID()) && slices.Contains(y.m.mesh.list(Topic(au.shard)), x.h.ID())
	})
	ev := au.event(t, 1, "found through the DHT")
	if err := x.m.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the other subscriber receives the event", func() bool {
		return y.sink.has(ev.ID)
	})
}
