package mesh

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"

	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"

	"fleetmesh.org/fleetmesh/mesh/peerexchange"
)

// TestResourceLimitsExplicit checks that the per-peer and per-protocol
// limits are ours, not go-libp2p's scaled defaults, and that MaxFDs caps
// the system's descriptors.
func TestResourceLimitsExplicit(t *testing.T) {
	l := resourceLimits(Config{MaxFDs: 100}).ToPartialLimitConfig()
	if l.PeerDefault.StreamsInbound != peerStreamsIn || l.PeerDefault.Conns != peerConns || l.PeerDefault.Memory != rcmgr.LimitVal64(peerMemory) {
		t.Errorf("per-peer limits %+v", l.PeerDefault)
	}
	if l.ProtocolPeerDefault.StreamsInbound != protoPeerStreamsIn {
		t.Errorf("per-protocol-peer limits %+v", l.ProtocolPeerDefault)
	}
	if got := l.ProtocolPeer[peerexchange.Protocol].StreamsInbound; got != pexPeerStreams/2 {
		t.Errorf("PEX streams per peer %d", got)
	}
	if l.System.FD != 100 {
		t.Errorf("system FD %d, want MaxFDs 100", l.System.FD)
	}
}

// TestLoopbackLimits checks that loopback is exempt from the per-address
// connection limits unless LimitLoopback, and then gets exactly the limit
// any other address gets.
func TestLoopbackLimits(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		addr string
		want int // connections admitted of addrConns+4
	}{
		{Config{}, "/ip4/127.0.0.1/tcp/1", addrConns + 4},
		{Config{LimitLoopback: true}, "/ip4/127.0.0.1/tcp/1", addrConns},
		{Config{}, "/ip4/192.0.2.1/tcp/1", addrConns},
		{Config{LimitLoopback: true}, "/ip6/::1/tcp/1", addrConns},
	} {
		rm, err := newResourceManager(tc.cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for range addrConns + 4 {
			if _, err := rm.OpenConnection(network.DirInbound, true, ma.StringCast(tc.addr)); err == nil {
				got++
			}
		}
		rm.Close()
		if got != tc.want {
			t.Errorf("%s, LimitLoopback %v: %d connections admitted, want %d", tc.addr, tc.cfg.LimitLoopback, got, tc.want)
		}
	}
}
