package mesh

import (
	"fmt"
	"log/slog"

	"github.com/libp2p/go-libp2p"
	coreconnmgr "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ws "github.com/libp2p/go-libp2p/p2p/transport/websocket"

	"fleetmesh.org/fleetmesh/identity"
)

// UserAgent is what the host tells peers in identify.
const UserAgent = "fleetmesh"

// NewHost builds the node's libp2p host on its own key, so that the host's
// PeerID and the node's DID name the same Ed25519 key: TCP, QUIC and
// WebSocket transports listening on cfg.ListenAddrs, Noise, yamux, the
// resource manager scaled by cfg.ResourceMaxMemory and cfg.ResourceMaxFDs,
// a connection manager with cfg's water marks, and NAT traversal as
// spec/mesh-nat.md says: AutoNAT v1 and v2 (client and service), the relay
// client, AutoRelay with cfg.StaticRelays as its only candidates (a mesh
// made by Open adds those its descriptors name), DCUtR hole punching and,
// only if cfg.NATPortMap, UPnP/NAT-PMP. The caller owns the host and
// closes it.
func NewHost(key *identity.Key, cfg Config) (host.Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n, err := newNAT(cfg, slog.New(slog.DiscardHandler), newCounters(cfg.MaxReasons))
	if err != nil {
		return nil, err
	}
	return newHost(key, cfg, n, nil, nil, nil)
}

// newHost is NewHost for a validated cfg with defaults, with n as
// AutoRelay's peer source and the hole punch tracer, rep told of what
// the resource manager refuses (nil: nobody), bw, if not nil,
// counting bytes per protocol (and, with circuit hooks, metering the
// client side of circuits), and gater, if not nil, refusing peers.
func newHost(key *identity.Key, cfg Config, n *nat, rep rcmgr.MetricsReporter, bw *metrics.BandwidthCounter, gater coreconnmgr.ConnectionGater) (host.Host, error) {
	cm, err := connmgr.NewConnManager(cfg.ConnLowWater, cfg.ConnHighWater, connmgr.WithGracePeriod(cfg.ConnGracePeriod))
	if err != nil {
		return nil, fmt.Errorf("mesh: connection manager: %w", err)
	}
	rm, err := newResourceManager(cfg, rep)
	if err != nil {
		cm.Close()
		return nil, err
	}
	opts := []libp2p.Option{
		libp2p.Identity(key.Libp2pKey()),
		libp2p.ListenAddrStrings(cfg.ListenAddrs...),
		// Without SO_REUSEPORT a second node given the same TCP port
		// fails to bind it instead of sharing it with the first (issue
		// 12). TCP hole punching needs the port reuse; QUIC's, which
		// shares one UDP socket, does not, and DCUtR tries both.
		libp2p.Transport(tcp.NewTCPTransport, tcp.DisableReuseport()),
		libp2p.Transport(quic.NewTransport),
		libp2p.Transport(ws.New),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.UserAgent(UserAgent),
		// Metrics would go to the process-wide Prometheus registry; the
		// node exports the mesh's own counters instead (Mesh.Stats).
		libp2p.DisableMetrics(),
		// AutoNAT v1 answers "can you dial me back?" by dialling the
		// asker's observed address, which is how a node behind NAT with
		// too few peers to confirm an observed address of its own still
		// learns it is private. v2 confirms each of a node's own public
		// addresses. Both only dial back the peer that asked.
		libp2p.EnableNATService(),
		libp2p.EnableAutoNATv2(),
	}
	if !cfg.DisableAutoRelay {
		opts = append(opts, libp2p.EnableAutoRelayWithPeerSource(n.relayCandidates,
			// A small mesh may know one relay: use it rather than wait
			// for go-libp2p's default of four candidates.
			autorelay.WithMinCandidates(1),
			autorelay.WithMinInterval(cfg.RelaySearchInterval),
			autorelay.WithBackoff(cfg.RelayBackoff),
		))
	}
	if !cfg.DisableHolePunching {
		opts = append(opts, libp2p.EnableHolePunching(holepunch.WithTracer(n)))
	}
	if cfg.NATPortMap {
		opts = append(opts, libp2p.NATPortMap())
	}
	if bw != nil {
		var r metrics.Reporter = bw
		if n.circ != nil {
			r = reporter{BandwidthCounter: bw, c: n.circ}
		}
		opts = append(opts, libp2p.BandwidthReporter(r))
	}
	if gater != nil {
		opts = append(opts, libp2p.ConnectionGater(gater))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		rm.Close()
		cm.Close()
		if inUse := checkAddrsFree(cfg.ListenAddrs); inUse != nil {
			return nil, inUse
		}
		return nil, fmt.Errorf("mesh: libp2p host: %w", err)
	}
	if err := checkListening(h, cfg.ListenAddrs); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}
