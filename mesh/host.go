package mesh

import (
	"fmt"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
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
// and a connection manager with cfg's water marks. The caller owns the host
// and closes it.
func NewHost(key *identity.Key, cfg Config) (host.Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cm, err := connmgr.NewConnManager(cfg.ConnLowWater, cfg.ConnHighWater, connmgr.WithGracePeriod(cfg.ConnGracePeriod))
	if err != nil {
		return nil, fmt.Errorf("mesh: connection manager: %w", err)
	}
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	concrete := limits.AutoScale()
	if cfg.ResourceMaxMemory > 0 {
		concrete = limits.Scale(cfg.ResourceMaxMemory, cfg.ResourceMaxFDs)
	}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(concrete))
	if err != nil {
		cm.Close()
		return nil, fmt.Errorf("mesh: resource manager: %w", err)
	}
	h, err := libp2p.New(
		libp2p.Identity(key.Libp2pKey()),
		libp2p.ListenAddrStrings(cfg.ListenAddrs...),
		libp2p.Transport(tcp.NewTCPTransport),
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
	)
	if err != nil {
		rm.Close()
		cm.Close()
		return nil, fmt.Errorf("mesh: libp2p host: %w", err)
	}
	return h, nil
}
