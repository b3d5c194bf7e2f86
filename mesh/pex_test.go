package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
)

// signDescriptor signs n's descriptor listing its mock address.
func signDescriptor(t testing.TB, n *testNode, seq uint64) []byte {
	t.Helper()
	now := time.Now().Unix()
	s, err := descriptor.Sign(n.key, descriptor.Descriptor{
		DID:       n.key.DID(),
		Class:     descriptor.ClassHome,
		Seq:       seq,
		IssuedAt:  now,
		Expires:   now + 3600,
		Addresses: descriptor.Addresses{Libp2p: []string{n.p2pAddr()}},
	}, descriptor.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return s.JWS
}

// TestPeerExchange starts 12 nodes that know only node 0 and checks that
// peer exchange spreads every node's verified descriptor to every other
// node, and that nodes connect to the peers they learn of that way.
func TestPeerExchange(t *testing.T) {
	const count = 12
	_, nodes := newMockMesh(t, count, func(i int, nodes []*testNode) Config {
		cfg := testConfig()
		if i > 0 {
			cfg.Bootstrap = []string{nodes[0].p2pAddr()}
		}
		return cfg
	}, func(int) Hooks {
		return Hooks{VerifyDescriptor: peerexchange.VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{}))}
	})
	for _, n := range nodes {
		if err := n.m.SetLocalDescriptor(signDescriptor(t, n, 1)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "every node holds every other node's descriptor and is connected to it", func() bool {
		for _, n := range nodes {
			for _, o := range nodes {
				if _, ok := n.m.Descriptor(o.h.ID()); !ok {
					return false
				}
				if n != o && n.h.Network().Connectedness(o.h.ID()) != network.Connected {
					return false
				}
			}
		}
		return true
	})

	// A newer descriptor replaces the old one; a forged one is refused.
	newer := signDescriptor(t, nodes[5], 2)
	if err := nodes[5].m.SetLocalDescriptor(newer); err != nil {
		t.Fatal(err)
	}
	// A background round may bring it over first; then this learns 0.
	if n, err := nodes[1].m.pex.Exchange(context.Background(), nodes[5].h.ID()); err != nil || n > 1 {
		t.Fatalf("exchange with the re-signed node learnt %d descriptors (err %v), want at most 1", n, err)
	}
	if got, _ := nodes[1].m.Descriptor(nodes[5].h.ID()); string(got) != string(newer) {
		t.Fatal("the newer descriptor did not replace the older one")
	}
	// Once every node holds the same descriptors, exchanges carry only
	// sums: neither this one nor the background rounds send a descriptor.
	eventually(t, 30*time.Second, "every node holds the newer descriptor", func() bool {
		for _, n := range nodes {
			if got, _ := n.m.Descriptor(nodes[5].h.ID()); string(got) != string(newer) {
				return false
			}
		}
		return true
	})
	sent := func() (total uint64) {
		for _, n := range nodes {
			total += n.m.Stats().DescriptorsSent
		}
		return total
	}
	if n, err := nodes[1].m.pex.Exchange(context.Background(), nodes[5].h.ID()); err != nil || n != 0 {
		t.Fatalf("a repeated exchange learnt %d descriptors (err %v), want 0", n, err)
	}
	// An exchange that was in flight when the last node got the newer
	// descriptor may still deliver it, having asked for it before: what
	// must hold is that three rounds in a row then send nothing.
	eventually(t, 30*time.Second, "three maintenance rounds in a row send no descriptor", func() bool {
		before := sent()
		time.Sleep(3 * testConfig().MaintainInterval)
		return sent() == before
	})
	forged := []byte(string(newer[:len(newer)-4]) + "AAAA")
	rejected := nodes[2].m.Stats().DescriptorsRejected
	if kept := nodes[2].m.pex.Accept([][]byte{forged}); kept != 0 {
		t.Fatalf("a forged descriptor was kept")
	}
	if nodes[2].m.Stats().DescriptorsRejected != rejected+1 {
		t.Fatal("the forged descriptor was not counted as rejected")
	}
	if err := nodes[3].m.SetLocalDescriptor(signDescriptor(t, nodes[4], 9)); err == nil {
		t.Fatal("a node accepted another node's descriptor as its own")
	}
}

// TestLateDescriptorsMakeAFullMesh is the start-up order of a real node,
// whose mesh connects and exchanges before the node has signed its
// descriptor: five nodes join through node 0 and finish their joining
// exchanges with no descriptor to hand out; only then does each sign one.
// With maintenance rounds an hour apart, only the news of each node's own
// descriptor can tell the others, and every node must end up connected to
// every other. Before that news existed the mesh stayed a star around
// node 0 (issue 12's heal flake).
func TestLateDescriptorsMakeAFullMesh(t *testing.T) {
	const count = 5
	_, nodes := newMockMesh(t, count, func(i int, nodes []*testNode) Config {
		cfg := testConfig()
		cfg.MaintainInterval = time.Hour
		if i > 0 {
			cfg.Bootstrap = []string{nodes[0].p2pAddr()}
		}
		return cfg
	}, func(int) Hooks {
		return Hooks{VerifyDescriptor: peerexchange.VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{}))}
	})
	eventually(t, 30*time.Second, "every node has met node 0 without a descriptor", func() bool {
		for _, n := range nodes[1:] {
			if !n.m.pex.Met() || !nodes[0].m.pex.Met() {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		if err := n.m.SetLocalDescriptor(signDescriptor(t, n, 1)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "every node is connected to every other", func() bool {
		for _, n := range nodes {
			for _, o := range nodes {
				if n != o && n.h.Network().Connectedness(o.h.ID()) != network.Connected {
					return false
				}
			}
		}
		return true
	})
}
