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
	// Watched as an event, not polled: mocknet has no connection gater,
	// so b's mesh may redial a between two polls and the disconnection
	// would go unseen (the gater's refusal of that redial is
	// TestBannedPeerRefusedAtHandshake's).
	gone := make(chan struct{}, 1)
	a.h.Network().Notify(&network.NotifyBundle{DisconnectedF: func(_ network.Network, c network.Conn) {
		if c.RemotePeer() == b.h.ID() {
			select {
			case gone <- struct{}{}:
			default:
			}
		}
	}})
	a.m.misb.penalize(b.h.ID(), MisbehaviorPEXViolation)
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("not within 10s: the misbehaving peer disconnected")
	}
	if st := a.m.Stats(); st.PeersBanned != 1 || st.Misbehavior[MisbehaviorPEXViolation] != 4 {
		t.Fatalf("stats: banned %d, misbehavior %v", st.PeersBanned, st.Misbehavior)
	}
}

// TestBannedPeerRefusedAtHandshake checks, between real hosts over TCP
// (mocknet has no connection gater), that a banned peer's new connection
// is refused right after its security handshake and counted, and that the
// node does not dial it either.
func TestBannedPeerRefusedAtHandshake(t *testing.T) {
	cfg := Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTOff, ConnLowWater: 4, ConnHighWater: 16,
		ResourceMaxMemory: 256 << 20, ResourceMaxFDs: 256, DisableAutoRelay: true}
	a, err := Open(newKey(t), cfg, Hooks{Sink: newRecordingSink()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewHost(newKey(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ai := peer.AddrInfo{ID: a.h.ID(), Addrs: a.h.Addrs()}
	if err := b.Connect(ctx, ai); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		a.Penalize(b.ID(), MisbehaviorPEXViolation)
	}
	eventually(t, 10*time.Second, "the banned peer disconnected", func() bool {
		return a.h.Network().Connectedness(b.ID()) != network.Connected
	})
	b.Network().ClosePeer(a.h.ID())
	if err := b.Connect(ctx, ai); err == nil {
		// The dialler may see its side up before the refusal reaches it.
		eventually(t, 10*time.Second, "the banned peer's connection closed", func() bool {
			return b.Network().Connectedness(a.h.ID()) != network.Connected
		})
	}
	if got := a.Stats().BannedRefused; got == 0 {
		t.Fatal("the banned peer's connection was not refused at the handshake")
	}
	if err := a.h.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err == nil {
		t.Fatal("the node dialled a banned peer")
	}
}
