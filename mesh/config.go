package mesh

import (
	"errors"
	"fmt"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/config/setting"
)

// DHTMode says how the node takes part in the Kademlia DHT.
type DHTMode string

// The DHT modes.
const (
	// DHTAuto answers DHT queries only while AutoNAT says the node is
	// publicly reachable, and is a client otherwise.
	DHTAuto DHTMode = "auto"
	// DHTServer always answers DHT queries.
	DHTServer DHTMode = "server"
	// DHTClient only asks.
	DHTClient DHTMode = "client"
	// DHTOff runs no DHT.
	DHTOff DHTMode = "off"
)

// Config is the mesh's configuration, a plain struct the node fills from its
// TOML file. Zero fields take the defaults of DefaultConfig; Validate says
// what is wrong with the rest.
type Config struct {
	// GossipTracer, if set, also traces GossipSub: the node's metering of
	// forwarded events per peer (meter.GossipTracer).
	GossipTracer pubsub.RawTracer
	// Circuits, if set, meter and grant the circuit relay service per
	// peer (the node's accounting; CircuitHooks).
	Circuits CircuitHooks

	// ListenAddrs are the multiaddrs the host listens on: /tcp, /udp/…/quic-v1
	// and /tcp/…/ws are understood.
	ListenAddrs []string
	// ListenFallback moves a listen address whose port another process
	// holds to a free port of the same shape, with a warning, instead of
	// refusing to start. It is for addresses the operator did not choose
	// (the defaults, DefaultListenAddrs); an address an operator chose is
	// refused when held, naming it (ErrListenAddrInUse).
	ListenFallback bool

	// ConnLowWater and ConnHighWater are the connection manager's marks:
	// above the high mark it trims connections down to the low mark. The
	// mesh also dials remembered peers while below the low mark.
	ConnLowWater  int
	ConnHighWater int
	// ConnGracePeriod protects new connections from trimming.
	ConnGracePeriod time.Duration
	// ResourceMaxMemory and ResourceMaxFDs scale the resource manager's
	// limits (go-libp2p's default scaling); set both or neither. Zero means
	// an eighth of the machine's memory and half its file descriptor limit,
	// as go-libp2p's AutoScale does.
	ResourceMaxMemory int64
	ResourceMaxFDs    int
	// LimitLoopback applies the per-address connection limits
	// (resources.go) to loopback addresses too. go-libp2p exempts them so
	// that many nodes on one machine can mesh, which is also what hides
	// those limits from a test on loopback; a test that means to see what
	// a peer on the internet would get sets it.
	LimitLoopback bool
	// MaxFDs, if set, caps the file descriptors the host may use (the
	// resource manager's system FD limit) below what the scaling gives, so
	// that the mesh keeps to its share of the process's file limit.
	MaxFDs int

	// Bootstrap are multiaddrs ending in /p2p/<peer id>. The code lists no
	// bootstrap peer of its own: these come only from the operator.
	Bootstrap []string
	// MDNS says when the node finds peers, and is found, on the local
	// network by multicast DNS: never (MDNSOff, the zero value), always
	// (MDNSOn), or while AutoNAT does not find it publicly reachable
	// (MDNSWhilePrivate).
	MDNS MDNSMode
	// DHT is the node's DHT mode.
	DHT DHTMode
	// DisableTopicDiscovery stops GossipSub from advertising and looking up
	// the peers of its shards in the DHT. With it on (the default), a node
	// finds the other subscribers of its shards beyond its direct peers.
	DisableTopicDiscovery bool
	// RedialBackoff is how long a remembered peer that could not be dialled
	// is left alone.
	RedialBackoff time.Duration
	// AddrBookDir is where the address book is persisted; empty keeps it in
	// memory only.
	AddrBookDir string
	// DHTDir is where the DHT keeps the provider records other nodes
	// announce to this one, on disk; empty keeps them in memory, where
	// they grow with every durably held event for the 48 hours a record
	// lives (tests). Only Open uses it: the records may be closed only
	// after the host, which New's caller owns.
	DHTDir string
	// AddrBookMaxPeers bounds the address book.
	AddrBookMaxPeers int
	// AddrBookSaveInterval is how often a changed address book is written.
	AddrBookSaveInterval time.Duration
	// ReconnectPeers is how many remembered peers are dialled at once when
	// the node has fewer than ConnLowWater connections.
	ReconnectPeers int
	// DialTimeout bounds one dial.
	DialTimeout time.Duration
	// MaintainInterval is how often the mesh checks its connection count,
	// dials remembered peers if it is low and runs a peer exchange round.
	MaintainInterval time.Duration

	// MaxMessageBytes bounds one GossipSub message (one event's JSON).
	MaxMessageBytes int
	// SubscriptionBuffer bounds the events queued per subscribed shard
	// between GossipSub and the Sink; beyond it GossipSub drops and counts.
	SubscriptionBuffer int
	// MaxReasons bounds the distinct refusal reasons counted separately;
	// further reasons are counted under ReasonOther.
	MaxReasons int

	// PEXMaxDescriptors bounds the descriptors sent or accepted in one
	// peer exchange message.
	PEXMaxDescriptors int
	// PEXMaxDescriptorBytes bounds one signed descriptor.
	PEXMaxDescriptorBytes int
	// PEXKnownMax bounds the verified descriptors the node keeps to pass on.
	PEXKnownMax int
	// PEXTimeout bounds one exchange.
	PEXTimeout time.Duration
	// PEXConcurrency bounds exchanges running at once.
	PEXConcurrency int
	// PEXNewsFanout is how many connected peers a node runs an exchange
	// with as soon as it learns of a node it did not know, so that news of
	// a newcomer reaches the whole mesh in a few hops rather than at the
	// next maintenance round (package mesh/peerexchange).
	PEXNewsFanout int
	// PEXNewsInterval is the least time between two such spreads: news
	// that arrives meanwhile goes out together in the next.
	PEXNewsInterval time.Duration

	// Durability places the shards this node holds for durability and
	// bounds the announcement of their events (spec/mesh-placement.md).
	Durability DurabilityConfig

	// NAT traversal (spec/mesh-nat.md). AutoNAT (v1 and v2, client and
	// service) always runs; it only ever dials back peers that asked.

	// RelayService says when this node relays circuits (circuit relay v2)
	// for others. RelayAuto, the default, relays while the node is
	// publicly reachable.
	RelayService RelayMode
	// RelayLimits bound the relay service.
	RelayLimits RelayLimits
	// StaticRelays are relays (multiaddrs ending in /p2p/<peer id>) to
	// reserve a slot with while privately reachable, tried before the
	// relays the mesh learns of from descriptors.
	StaticRelays []string
	// DisableAutoRelay stops the node from reserving relay slots while
	// privately reachable, leaving it unreachable for peers behind NATs.
	DisableAutoRelay bool
	// RelaySearchInterval is how often, at most, AutoRelay asks the mesh
	// for more relay candidates while it holds fewer reservations than it
	// wants.
	RelaySearchInterval time.Duration
	// RelayBackoff is how long a relay that refused or failed a
	// reservation is left alone.
	RelayBackoff time.Duration
	// DisableHolePunching turns off DCUtR.
	DisableHolePunching bool
	// NATPortMap asks the LAN's router for a port mapping with UPnP or
	// NAT-PMP. Off by default: it sends traffic to the router that the
	// operator did not ask for.
	NATPortMap bool
}

// RelayMode says when a node runs the circuit relay v2 service.
type RelayMode string

// The relay modes.
const (
	// RelayAuto relays while AutoNAT finds the node publicly reachable.
	RelayAuto RelayMode = "auto"
	// RelayOn always relays.
	RelayOn RelayMode = "on"
	// RelayOff never relays.
	RelayOff RelayMode = "off"
)

// MDNSMode says when a node runs mDNS discovery.
type MDNSMode string

// The mDNS modes.
const (
	// MDNSOff never runs mDNS.
	MDNSOff MDNSMode = "off"
	// MDNSOn runs it for as long as the mesh runs.
	MDNSOn MDNSMode = "on"
	// MDNSWhilePrivate runs it while AutoNAT has not found the node
	// publicly reachable: from start, stopped once the node is found
	// public, started again if it is later found private. It is how a
	// node whose class follows its reachability runs mDNS only while it
	// is a home node.
	MDNSWhilePrivate MDNSMode = "private"
)

// RelayLimits bound a node's circuit relay v2 service: how many peers may
// hold a reservation, how many circuits each may have, and how long and how
// much data one circuit may carry before the relay resets it. Relayed
// connections are for reaching a node behind NAT and upgrading to a direct
// connection (DCUtR), not for bulk traffic, so the defaults are go-libp2p's.
//
// It is also config.toml's [mesh.relay_limits] section, so each limit is
// declared here alone.
type RelayLimits struct {
	// MaxReservations bounds the reservations held at once.
	MaxReservations int `toml:"max_reservations" comment:"relay reservations held for others at once"`
	// MaxReservationsPerIP bounds reservations from one IP address.
	MaxReservationsPerIP int `toml:"max_reservations_per_ip" comment:"reservations from one IP address"`
	// MaxCircuits bounds the open circuits to or from one peer.
	MaxCircuits int `toml:"max_circuits" comment:"open circuits to or from one peer"`
	// ReservationTTL is how long a reservation lasts unless refreshed.
	ReservationTTL setting.Duration `toml:"reservation_ttl" comment:"how long a reservation lasts unless refreshed"`
	// CircuitDuration is how long one circuit may stay open.
	CircuitDuration setting.Duration `toml:"circuit_duration" comment:"how long one circuit may stay open"`
	// CircuitBytes is how much one circuit may carry in each direction.
	CircuitBytes int64 `toml:"circuit_bytes" comment:"bytes one circuit may carry each way"`
}

// DefaultRelayLimits are go-libp2p's relay defaults.
func DefaultRelayLimits() RelayLimits {
	return RelayLimits{
		MaxReservations:      128,
		MaxReservationsPerIP: 8,
		MaxCircuits:          16,
		ReservationTTL:       setting.DurationOf(time.Hour),
		CircuitDuration:      setting.DurationOf(2 * time.Minute),
		CircuitBytes:         128 << 10,
	}
}

// DefaultConfig returns the defaults: listen on all interfaces on port 4001
// (TCP and QUIC) and 4002 (WebSocket), DHT in auto mode, no mDNS, no
// bootstrap peers.
func DefaultConfig() Config {
	return Config{
		ListenAddrs: []string{
			"/ip4/0.0.0.0/tcp/4001",
			"/ip6/::/tcp/4001",
			"/ip4/0.0.0.0/udp/4001/quic-v1",
			"/ip6/::/udp/4001/quic-v1",
			"/ip4/0.0.0.0/tcp/4002/ws",
			"/ip6/::/tcp/4002/ws",
		},
		ConnLowWater:          64,
		ConnHighWater:         192,
		ConnGracePeriod:       time.Minute,
		DHT:                   DHTAuto,
		AddrBookMaxPeers:      1024,
		AddrBookSaveInterval:  time.Minute,
		ReconnectPeers:        16,
		DialTimeout:           10 * time.Second,
		RedialBackoff:         5 * time.Minute,
		MaintainInterval:      30 * time.Second,
		MaxMessageBytes:       256 << 10,
		SubscriptionBuffer:    1024,
		MaxReasons:            64,
		PEXMaxDescriptors:     32,
		PEXMaxDescriptorBytes: 16 << 10,
		PEXKnownMax:           1024,
		PEXTimeout:            10 * time.Second,
		PEXConcurrency:        4,
		PEXNewsFanout:         8,
		PEXNewsInterval:       500 * time.Millisecond,
		RelayService:          RelayAuto,
		RelayLimits:           DefaultRelayLimits(),
		RelaySearchInterval:   30 * time.Second,
		RelayBackoff:          5 * time.Minute,
		Durability:            DefaultDurabilityConfig(),
	}
}

// withDefaults returns c with every zero field set from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.ListenAddrs == nil {
		c.ListenAddrs = d.ListenAddrs
	}
	setInt(&c.ConnLowWater, d.ConnLowWater)
	setInt(&c.ConnHighWater, d.ConnHighWater)
	setDur(&c.ConnGracePeriod, d.ConnGracePeriod)
	if c.DHT == "" {
		c.DHT = d.DHT
	}
	setInt(&c.AddrBookMaxPeers, d.AddrBookMaxPeers)
	setDur(&c.AddrBookSaveInterval, d.AddrBookSaveInterval)
	setInt(&c.ReconnectPeers, d.ReconnectPeers)
	setDur(&c.DialTimeout, d.DialTimeout)
	setDur(&c.RedialBackoff, d.RedialBackoff)
	setDur(&c.MaintainInterval, d.MaintainInterval)
	setInt(&c.MaxMessageBytes, d.MaxMessageBytes)
	setInt(&c.SubscriptionBuffer, d.SubscriptionBuffer)
	setInt(&c.MaxReasons, d.MaxReasons)
	setInt(&c.PEXMaxDescriptors, d.PEXMaxDescriptors)
	setInt(&c.PEXMaxDescriptorBytes, d.PEXMaxDescriptorBytes)
	setInt(&c.PEXKnownMax, d.PEXKnownMax)
	setDur(&c.PEXTimeout, d.PEXTimeout)
	setInt(&c.PEXConcurrency, d.PEXConcurrency)
	setInt(&c.PEXNewsFanout, d.PEXNewsFanout)
	setDur(&c.PEXNewsInterval, d.PEXNewsInterval)
	if c.RelayService == "" {
		c.RelayService = d.RelayService
	}
	if c.MDNS == "" {
		c.MDNS = MDNSOff
	}
	l, dl := &c.RelayLimits, d.RelayLimits
	setInt(&l.MaxReservations, dl.MaxReservations)
	setInt(&l.MaxReservationsPerIP, dl.MaxReservationsPerIP)
	setInt(&l.MaxCircuits, dl.MaxCircuits)
	setDur(&l.ReservationTTL.Duration, dl.ReservationTTL.Duration)
	setDur(&l.CircuitDuration.Duration, dl.CircuitDuration.Duration)
	if l.CircuitBytes == 0 {
		l.CircuitBytes = dl.CircuitBytes
	}
	setDur(&c.RelaySearchInterval, d.RelaySearchInterval)
	setDur(&c.RelayBackoff, d.RelayBackoff)
	c.Durability = c.Durability.withDefaults()
	return c
}

func setInt(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

func setDur(v *time.Duration, d time.Duration) {
	if *v == 0 {
		*v = d
	}
}

// Validate reports the first thing wrong with c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, s := range c.ListenAddrs {
		if _, err := ma.NewMultiaddr(s); err != nil {
			return fmt.Errorf("mesh: listen address %q: %w", s, err)
		}
	}
	if _, err := c.bootstrapPeers(); err != nil {
		return err
	}
	switch c.DHT {
	case DHTAuto, DHTServer, DHTClient, DHTOff:
	default:
		return fmt.Errorf("mesh: DHT mode %q: want auto, server, client or off", c.DHT)
	}
	switch c.RelayService {
	case RelayAuto, RelayOn, RelayOff:
	default:
		return fmt.Errorf("mesh: relay service mode %q: want auto, on or off", c.RelayService)
	}
	switch c.MDNS {
	case MDNSOff, MDNSOn, MDNSWhilePrivate:
	default:
		return fmt.Errorf("mesh: mDNS mode %q: want off, on or private", c.MDNS)
	}
	if _, err := parseP2PAddrs("static relay", c.StaticRelays); err != nil {
		return err
	}
	positive := []struct {
		name string
		v    int64
	}{
		{"ConnLowWater", int64(c.ConnLowWater)},
		{"ConnHighWater", int64(c.ConnHighWater)},
		{"ConnGracePeriod", int64(c.ConnGracePeriod)},
		{"AddrBookMaxPeers", int64(c.AddrBookMaxPeers)},
		{"AddrBookSaveInterval", int64(c.AddrBookSaveInterval)},
		{"ReconnectPeers", int64(c.ReconnectPeers)},
		{"DialTimeout", int64(c.DialTimeout)},
		{"RedialBackoff", int64(c.RedialBackoff)},
		{"MaintainInterval", int64(c.MaintainInterval)},
		{"MaxMessageBytes", int64(c.MaxMessageBytes)},
		{"SubscriptionBuffer", int64(c.SubscriptionBuffer)},
		{"MaxReasons", int64(c.MaxReasons)},
		{"PEXMaxDescriptors", int64(c.PEXMaxDescriptors)},
		{"PEXMaxDescriptorBytes", int64(c.PEXMaxDescriptorBytes)},
		{"PEXKnownMax", int64(c.PEXKnownMax)},
		{"PEXTimeout", int64(c.PEXTimeout)},
		{"PEXConcurrency", int64(c.PEXConcurrency)},
		{"PEXNewsFanout", int64(c.PEXNewsFanout)},
		{"PEXNewsInterval", int64(c.PEXNewsInterval)},
		{"RelayLimits.MaxReservations", int64(c.RelayLimits.MaxReservations)},
		{"RelayLimits.MaxReservationsPerIP", int64(c.RelayLimits.MaxReservationsPerIP)},
		{"RelayLimits.MaxCircuits", int64(c.RelayLimits.MaxCircuits)},
		{"RelayLimits.ReservationTTL", int64(c.RelayLimits.ReservationTTL.Duration)},
		{"RelayLimits.CircuitDuration", int64(c.RelayLimits.CircuitDuration.Duration)},
		{"RelayLimits.CircuitBytes", c.RelayLimits.CircuitBytes},
		{"RelaySearchInterval", int64(c.RelaySearchInterval)},
		{"RelayBackoff", int64(c.RelayBackoff)},
	}
	for _, p := range positive {
		if p.v < 0 {
			return fmt.Errorf("mesh: %s is negative", p.name)
		}
	}
	if err := c.Durability.validate(); err != nil {
		return err
	}
	if c.ConnLowWater > c.ConnHighWater {
		return fmt.Errorf("mesh: ConnLowWater %d is above ConnHighWater %d", c.ConnLowWater, c.ConnHighWater)
	}
	if c.ResourceMaxMemory < 0 || c.ResourceMaxFDs < 0 {
		return errors.New("mesh: resource limits are negative")
	}
	if (c.ResourceMaxMemory == 0) != (c.ResourceMaxFDs == 0) {
		return errors.New("mesh: set both ResourceMaxMemory and ResourceMaxFDs, or neither")
	}
	return nil
}

// bootstrapPeers parses Bootstrap, merging addresses of the same peer.
func (c Config) bootstrapPeers() ([]peer.AddrInfo, error) {
	return parseP2PAddrs("bootstrap", c.Bootstrap)
}

// parseP2PAddrs parses multiaddrs ending in /p2p/<peer id>, merging
// addresses of the same peer; what names them in errors.
func parseP2PAddrs(what string, list []string) ([]peer.AddrInfo, error) {
	var addrs []ma.Multiaddr
	for _, s := range list {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("mesh: %s address %q: %w", what, s, err)
		}
		addrs = append(addrs, a)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(addrs...)
	if err != nil {
		return nil, fmt.Errorf("mesh: %s addresses must end in /p2p/<peer id>: %w", what, err)
	}
	return infos, nil
}
