package mesh

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	xrate "github.com/libp2p/go-libp2p/x/rate"

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

// Per-address connection limits (spec/limits.md), counted by the resource
// manager before a connection's security handshake: connections open at
// once and new connections a second, per IPv4 address and per IPv6 /56
// (and /48). They are go-libp2p's own defaults, written out so that they
// are this node's choice and apply, with Config.LimitLoopback, to loopback
// too.
const (
	addrConns       = 8   // open at once, per IPv4 address or IPv6 /56
	ipv6SiteConns   = 64  // per IPv6 /48
	addrConnsPerSec = 0.2 // new connections a second, per address
	addrConnsBurst  = 16  // and their burst
	ipv6SitePerSec  = 0.5 // per IPv6 /48
	ipv6SiteBurst   = 80  // and its burst
	connRateGrace   = time.Minute
)

// connLimitOptions are the resource manager options for the per-address
// limits. go-libp2p exempts 127.0.0.0/8 and ::1 from them by default, so
// that many nodes on one machine can mesh; unless cfg.LimitLoopback this
// node does the same, and says so here.
func connLimitOptions(cfg Config) []rcmgr.Option {
	var prefixes4, prefixes6 []rcmgr.NetworkPrefixLimit
	var rates []xrate.PrefixLimit
	if !cfg.LimitLoopback {
		loop4, loop6 := netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")
		prefixes4 = []rcmgr.NetworkPrefixLimit{{Network: loop4, ConnCount: math.MaxInt}}
		prefixes6 = []rcmgr.NetworkPrefixLimit{{Network: loop6, ConnCount: math.MaxInt}}
		rates = []xrate.PrefixLimit{{Prefix: loop4}, {Prefix: loop6}} // a zero Limit is unlimited
	} else {
		// Non-nil and empty: no prefix is exempt.
		prefixes4, prefixes6 = []rcmgr.NetworkPrefixLimit{}, []rcmgr.NetworkPrefixLimit{}
	}
	return []rcmgr.Option{
		rcmgr.WithNetworkPrefixLimit(prefixes4, prefixes6),
		rcmgr.WithLimitPerSubnet(
			[]rcmgr.ConnLimitPerSubnet{{PrefixLength: 32, ConnCount: addrConns}},
			[]rcmgr.ConnLimitPerSubnet{{PrefixLength: 56, ConnCount: addrConns}, {PrefixLength: 48, ConnCount: ipv6SiteConns}}),
		rcmgr.WithConnRateLimiters(&xrate.Limiter{
			NetworkPrefixLimits: rates,
			SubnetRateLimiter: xrate.SubnetLimiter{
				IPv4SubnetLimits: []xrate.SubnetLimit{{PrefixLength: 32, Limit: xrate.Limit{RPS: addrConnsPerSec, Burst: addrConnsBurst}}},
				IPv6SubnetLimits: []xrate.SubnetLimit{
					{PrefixLength: 56, Limit: xrate.Limit{RPS: addrConnsPerSec, Burst: addrConnsBurst}},
					{PrefixLength: 48, Limit: xrate.Limit{RPS: ipv6SitePerSec, Burst: ipv6SiteBurst}},
				},
				GracePeriod: connRateGrace,
			},
		}),
	}
}

// newResourceManager builds the host's resource manager: go-libp2p's
// default scaled limits (to cfg.ResourceMaxMemory and cfg.ResourceMaxFDs
// when set) with explicit per-peer, per-protocol and per-address limits
// over them, and rep told of what it refuses (nil: nobody).
func newResourceManager(cfg Config, rep rcmgr.MetricsReporter) (network.ResourceManager, error) {
	opts := connLimitOptions(cfg)
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
