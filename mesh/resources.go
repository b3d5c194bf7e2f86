package mesh

import (
	"fmt"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"

	"fleetmesh.org/fleetmesh/mesh/peerexchange"
)

// Per-peer resource limits (spec/limits.md). go-libp2p's defaults scale
// with the machine and let one peer hold hundreds of streams and a large
// share of memory; a permissionless node sets its own, so that one peer
// cannot take what every other peer needs.
const (
	peerConns          = 8 // a peer may dial over TCP, QUIC and WebSocket, and redial
	peerStreams        = 256
	peerStreamsIn      = 128
	peerMemory         = 64 << 20
	peerFDs            = 8
	protoPeerStreamsIn = 16 // per protocol per peer: sync sessions, lookups, DIDComm
	protoPeerMemory    = 16 << 20
	pexPeerStreams     = 2 // an exchange is one stream; two allow a crossing
	pexStreamsIn       = 64
)

// newResourceManager builds the host's resource manager: go-libp2p's
// default scaled limits (to cfg.ResourceMaxMemory and cfg.ResourceMaxFDs
// when set) with explicit per-peer and per-protocol limits over them, and
// rep told of what it refuses (nil: nobody).
func newResourceManager(cfg Config, rep rcmgr.MetricsReporter) (network.ResourceManager, error) {
	var opts []rcmgr.Option
	if rep != nil {
		opts = append(opts, rcmgr.WithMetrics(rep))
	}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(resourceLimits(cfg)), opts...)
	if err != nil {
		return nil, fmt.Errorf("mesh: resource manager: %w", err)
	}
	return rm, nil
}

// resourceLimits returns the concrete limits newResourceManager uses.
func resourceLimits(cfg Config) rcmgr.ConcreteLimitConfig {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	base := limits.AutoScale()
	if cfg.ResourceMaxMemory > 0 {
		base = limits.Scale(cfg.ResourceMaxMemory, cfg.ResourceMaxFDs)
	}
	perProtoPeer := rcmgr.ResourceLimits{
		StreamsInbound: protoPeerStreamsIn,
		Memory:         protoPeerMemory,
	}
	partial := rcmgr.PartialLimitConfig{
		PeerDefault: rcmgr.ResourceLimits{
			Conns:          peerConns,
			ConnsInbound:   peerConns,
			Streams:        peerStreams,
			StreamsInbound: peerStreamsIn,
			Memory:         peerMemory,
			FD:             peerFDs,
		},
		ProtocolPeerDefault: perProtoPeer,
		ProtocolPeer: map[protocol.ID]rcmgr.ResourceLimits{
			peerexchange.Protocol: {Streams: pexPeerStreams, StreamsInbound: pexPeerStreams / 2, StreamsOutbound: pexPeerStreams / 2},
		},
		Protocol: map[protocol.ID]rcmgr.ResourceLimits{
			peerexchange.Protocol: {StreamsInbound: pexStreamsIn},
		},
	}
	out := partial.Build(base)
	if cfg.MaxFDs > 0 {
		sys := out.ToPartialLimitConfig()
		if fd := int(sys.System.FD); fd <= 0 || fd > cfg.MaxFDs {
			sys.System.FD = rcmgr.LimitVal(cfg.MaxFDs)
		}
		out = sys.Build(base)
	}
	return out
}
