package mesh

import (
	"testing"

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
