package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestMisbehavingPeerBanned checks that penalties adding up to banScore
// disconnect a peer, count it in Stats, and that its next connection is
// closed while the ban lasts.
func TestMisbehavingPeerBanned(t *testing.T) {
	mn, nodes := newMockMesh(t, 2, func(int, []*testNode) Config { return testConfig() }, func(int) Hooks { return Hooks{} })
	a, b := nodes[0], nodes[1]
	connect := func() {
		if _, err := mn.ConnectPeers(a.h.ID(), b.h.ID()); err != nil {
			t.Fatal(err)
		}
	}
	connect()
	for i := 0; i < 3; i++ {
		a.m.misb.penalize(b.h.ID(), MisbehaviorPEXViolation)
	}
	if a.h.Network().Connectedness(b.h.ID()) != network.Connected {
		t.Fatal("disconnected below the ban score")
	}
	a.m.misb.penalize(b.h.ID(), MisbehaviorPEXViolation)
	eventually(t, 10*time.Second, "the misbehaving peer disconnected", func() bool {
		return a.h.Network().Connectedness(b.h.ID()) != network.Connected
	})
	if st := a.m.Stats(); st.PeersBanned != 1 || st.Misbehavior[MisbehaviorPEXViolation] != 4 {
		t.Fatalf("stats: banned %d, misbehavior %v", st.PeersBanned, st.Misbehavior)
	}
	// While banned, b's new connections are closed.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.h.Connect(ctx, peer.AddrInfo{ID: a.h.ID(), Addrs: a.h.Addrs()})
	eventually(t, 10*time.Second, "a banned peer's new connection closed", func() bool {
		return a.h.Network().Connectedness(b.h.ID()) != network.Connected
	})
}
