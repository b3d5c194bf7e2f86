package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/announce"
	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// MeshDir holds the mesh's state (the address book) in a node home.
const MeshDir = "mesh"

// descriptorTTL is how long the node's signed descriptor is valid; it is
// re-signed well before.
const descriptorTTL = 24 * time.Hour

// meshPart is the node's mesh side: live replication, anti-entropy and
// lookups, the hooks that connect them to the relay, and the node's signed
// descriptor, whose class and offers follow its NAT status.
type meshPart struct {
	m       *mesh.Mesh
	sync    *meshsync.Service
	filters []nostr.Filter
	every   time.Duration
	lookups int
	// natChanged is signalled by the mesh when the node's reachability,
	// relaying or addresses change: the descriptor is re-signed.
	natChanged chan struct{}
	cfg        config.Config

	// Owned by the descriptor goroutine once start has run.
	lastSeq   uint64
	lastClass descriptor.Class

	// interest follows what the node's own clients subscribe to; nil
	// when [mesh] client_shards is 0.
	interest *clientInterest
	// irohAddr is the iroh address the descriptor lists (node/iroh.go);
	// nil when iroh is off.
	irohAddr func() *descriptor.IrohAddr
	// irohPeers are the peers reached over iroh only, for lookups.
	irohPeers func() []peer.ID
	// irohRelay is the iroh relay the descriptor offers (node/irohrelay.go).
	irohRelay func(class descriptor.Class, relayURL string) *descriptor.IrohRelayOffer
	// st and reprovide drive the re-announcement of durably held events
	// (node/reprovide.go); reprovide 0 turns it off.
	st        *store.Store
	reprovide time.Duration
	// Durability and content routing bounds (node/durability.go,
	// node/lookup.go).
	durablePeers, providers, dhtIDs int
	lookupStats                     lookupCounters
	// push carries new events to relayed peers (node/relaypush.go);
	// relayPushed counts the events they accepted.
	push        *relayPush
	relayPushed atomic.Uint64
	// announcer publishes the descriptor to [mesh] announce_relays
	// (spec/announce.md); nil when none is configured.
	announcer *announce.Announcer

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// meshLocal is the node's store and relay as meshsync needs them:
// replicated events enter through the relay, which verifies, stores and
// delivers them to live subscribers.
type meshLocal struct {
	*store.Store
	r *relay.Relay
}

func (l meshLocal) AddEvent(ctx context.Context, ev *nostr.Event) (eventstore.Result, error) {
	return l.r.AddEvent(ctx, ev, relay.FromMesh)
}

// Ingest is mesh.Sink: events from GossipSub go the same way.
func (l meshLocal) Ingest(ctx context.Context, ev *nostr.Event, _ peer.ID) error {
	_, err := l.r.AddEvent(ctx, ev, relay.FromMesh)
	return err
}

func openMesh(opts Options, st *store.Store, rl *relay.Relay, policy *boundary.Policy, acct *accountingPart) (*meshPart, error) {
	mc := opts.Config.Mesh
	filters, err := mc.SubscribeFilters()
	if err != nil {
		return nil, err
	}
	every := mc.SyncInterval.Duration
	if every <= 0 {
		every = time.Minute
	}
	maintain := mc.MaintainInterval.Duration
	local := meshLocal{Store: st, r: rl}
	mcfg := mesh.Config{
		ListenAddrs: append([]string{}, mc.Listen...),
		// The defaults move to a free port when another node holds 4001;
		// addresses an operator wrote are refused when held.
		ListenFallback: slices.Equal(mc.Listen, mesh.DefaultListenAddrs()),
		Bootstrap:      mc.Bootstrap,
		MDNS:           mc.MDNS,
		DHT:            mesh.DHTMode(mc.DHT),
		AddrBookDir:    opts.Home.Path(MeshDir),
		// Zero takes the mesh's default. The address book is saved as often
		// as connections are maintained, so a node killed without warning
		// still finds its recent peers on restart.
		MaintainInterval:     maintain,
		AddrBookSaveInterval: maintain,
		Durability:           mesh.DurabilityConfig{Replication: mc.Replication},
		// The mesh keeps to its share of the file limit, so that it and
		// the relay's clients never take the store's (spec/limits.md).
		MaxFDs:       rl.FileBudget().Mesh,
		GossipTracer: meter.GossipTracer(acct.meter),
	}
	applyNATConfig(&mcfg, opts.Config)
	natChanged := make(chan struct{}, 1)
	m, err := mesh.Open(opts.Key, mcfg, mesh.Hooks{
		Sink: local,
		Policy: func(ev *nostr.Event) (bool, string) {
			if r := policy.Allow(ev, boundary.Replicate); r != nil {
				return false, r.Name
			}
			return true, ""
		},
		VerifyDescriptor: peerexchange.VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{})),
		Logger:           opts.Log,
		OnNATChange: func(mesh.NATStatus) {
			select {
			case natChanged <- struct{}{}:
			default: // a re-sign is already due
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := m.Subscribe(mesh.ShardsFor(filters)...); err != nil {
		m.Close()
		return nil, fmt.Errorf("node: %w", err)
	}
	mp := &meshPart{
		m:          m,
		sync:       meshsync.New(m.Host(), local, policy, meshsync.Config{Meter: acct.meter, Allow: acct.allow}, opts.Log),
		filters:    filters,
		every:      every,
		lookups:    mc.LookupPeers,
		natChanged: natChanged,
		cfg:        opts.Config,

		durablePeers: mc.DurableSyncPeers,
		providers:    mc.LookupProviders,
		dhtIDs:       mc.LookupDHTIDs,
	}
	mp.st = st
	mp.reprovide = mc.ReprovideInterval.Duration
	if len(mc.AnnounceRelays) > 0 {
		if mp.announcer, err = openAnnouncer(opts); err != nil {
			m.Close()
			return nil, err
		}
	}
	if mc.ClientShards > 0 {
		mp.interest = newClientInterest(m, mc.ClientShards, mc.ClientLinger.Duration, opts.Log)
	}
	mp.wire(rl, opts.Log)
	return mp, nil
}

// wire hooks the mesh part into the relay: what the relay stores is
// published and, in durably held shards, announced; REQs look up what the
// node lacks.
func (mp *meshPart) wire(rl *relay.Relay, log *slog.Logger) {
	if mp.interest != nil {
		rl.Interest = mp.interest.hook
	}
	rl.OnStored = append(rl.OnStored, func(ev *nostr.Event, from relay.Origin) {
		if from == relay.FromMesh {
			return // GossipSub forwards what it delivered; publishing again would echo it
		}
		if err := mp.m.Publish(context.Background(), ev); err != nil {
			log.Debug("mesh: publish", "id", ev.IDHex(), "err", err)
		}
	})
	mp.provideStored(rl)
	mp.push = newRelayPush(mp, log)
	rl.OnStored = append(rl.OnStored, mp.push.hook)
	if mp.lookups > 0 {
		rl.Lookup = func(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event)) {
			mp.lookup(ctx, f, limit, fn)
		}
	}
}

// syncPeers lists up to n connected peers that speak the sync protocol, in
// random order so load spreads. A peer reached only through a relay is left
// out: a stream to it waits for a direct connection that may never come,
// and would hold up a REQ's lookup until its deadline.
func (mp *meshPart) syncPeers(n int) []peer.ID {
	h := mp.m.Host()
	var out []peer.ID
	for _, p := range h.Network().Peers() {
		if h.Network().Connectedness(p) != network.Connected {
			continue
		}
		if ok, err := h.Peerstore().SupportsProtocols(p, protocol.ID(meshsync.ProtocolID)); err == nil && len(ok) > 0 {
			out = append(out, p)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:min(len(out), n)]
}

// applyNATConfig sets the mesh's NAT traversal from the [mesh] keys and
// the class: with relay_service "auto", an explicit anchor always relays,
// an explicit home or leaf never does, and class auto relays while the node
// is publicly reachable.
func applyNATConfig(mcfg *mesh.Config, cfg config.Config) {
	mc := cfg.Mesh
	mode := mesh.RelayMode(mc.RelayService)
	if mode == "" || mode == mesh.RelayAuto {
		switch cfg.Class {
		case config.ClassAnchor:
			mode = mesh.RelayOn
		case config.ClassHome, config.ClassLeaf:
			mode = mesh.RelayOff
		default:
			mode = mesh.RelayAuto
		}
	}
	mcfg.RelayService = mode
	mcfg.RelayLimits = mc.RelayLimits
	mcfg.StaticRelays = mc.StaticRelays
	mcfg.DisableAutoRelay = !mc.AutoRelay
	mcfg.RelaySearchInterval = mc.RelaySearchInterval.Duration
	mcfg.DisableHolePunching = !mc.HolePunching
	mcfg.NATPortMap = mc.NATPortMap
}

// start signs the node's descriptor, re-signs it whenever the node's NAT
// status or addresses change (and every sync interval, so it never nears
// expiry), and runs anti-entropy: soon after start, then every interval,
// with a random connected peer, for each subscribed filter.
func (mp *meshPart) start(opts Options, relayURL string) {
	ctx, cancel := context.WithCancel(context.Background())
	mp.cancel = cancel
	// Peers learn of this node through peer exchange from the start.
	mp.publishDescriptor(opts, relayURL)
	// Every goroutine of the mesh part is started here and waited for by
	// close.
	run := func(f func()) {
		mp.wg.Add(1)
		go func() {
			defer mp.wg.Done()
			f()
		}()
	}
	run(func() {
		periodic.Run(ctx, mp.every, mp.every, mp.natChanged, func() { mp.publishDescriptor(opts, relayURL) })
	})
	if mp.interest != nil {
		run(func() { mp.interest.run(ctx) })
	}
	run(func() { mp.runReprovide(ctx, mp.st, mp.reprovide, opts.Log) })
	run(func() { mp.runDurable(ctx, opts.Log) })
	run(func() { mp.push.run(ctx) })
	if mp.announcer != nil {
		run(func() { mp.announcer.Run(ctx) })
	}
	run(func() {
		periodic.Run(ctx, firstRound, mp.every, nil, func() {
			for _, p := range mp.syncPeers(1) {
				for _, f := range mp.filters {
					st, err := mp.sync.SyncWith(ctx, p, f)
					if err != nil {
						opts.Log.Debug("mesh: sync", "peer", p, "err", err)
						continue
					}
					if st.Need+st.Have > 0 {
						opts.Log.Info("mesh: synced", "peer", p, "fetched", st.Fetched, "pushed", st.Pushed, "rounds", st.Rounds)
					}
				}
			}
		})
	})
}

// firstRound is how soon after start the first anti-entropy round runs:
// long enough for the first connections, short enough that a restarted
// node catches up at once.
const firstRound = 2 * time.Second

// class is the class the node declares now (declaredClass).
func (mp *meshPart) class(st mesh.NATStatus) descriptor.Class {
	return declaredClass(mp.cfg.Class, st)
}

// declaredClass is the class a node configured with class declares given
// its NAT status: the configured one, or with class auto, anchor while it
// is publicly reachable and relays for others, home otherwise.
func declaredClass(class string, st mesh.NATStatus) descriptor.Class {
	if class != config.ClassAuto && class != "" {
		return descriptor.Class(class)
	}
	if st.Reachability == network.ReachabilityPublic && st.RelayService {
		return descriptor.ClassAnchor
	}
	return descriptor.ClassHome
}

// publishDescriptor signs the node's descriptor as things stand and hands
// it to peer exchange. Only start and the descriptor goroutine call it,
// never at once.
func (mp *meshPart) publishDescriptor(opts Options, relayURL string) {
	st := mp.m.NATStatus()
	class := mp.class(st)
	if mp.lastClass != "" && class != mp.lastClass {
		opts.Log.Info("mesh: class changed", "from", mp.lastClass, "to", class, "reachability", st.Reachability.String(), "relay_service", st.RelayService)
	}
	mp.lastClass = class
	now := time.Now()
	// Strictly increasing, so a re-sign within the same millisecond still
	// supersedes the last descriptor.
	mp.lastSeq = max(uint64(now.UnixMilli()), mp.lastSeq+1)
	d := descriptor.Descriptor{
		DID:       opts.Key.DID(),
		Class:     class,
		Seq:       mp.lastSeq,
		IssuedAt:  now.Unix(),
		Expires:   now.Add(descriptorTTL).Unix(),
		Addresses: descriptor.Addresses{Libp2p: mp.addrs(), Relays: []string{relayURL}},
		Protocols: []string{meshsync.ProtocolID},
		Offers:    descriptor.Offers{Storage: storageOffer(opts.Config)},
	}
	if st.RelayService {
		l := mp.m.RelayLimits()
		d.Offers.CircuitRelay = &descriptor.CircuitRelayOffer{
			MaxReservations:   uint64(l.MaxReservations),
			MaxCircuitSeconds: uint64(max(l.CircuitDuration.Duration/time.Second, 1)),
			MaxCircuitBytes:   uint64(l.CircuitBytes),
		}
	}
	if mp.irohAddr != nil {
		d.Addresses.Iroh = mp.irohAddr()
	}
	if mp.irohRelay != nil {
		d.Offers.IrohRelay = mp.irohRelay(class, relayURL)
	}
	signed, err := descriptor.Sign(opts.Key, d, descriptor.DefaultLimits())
	if err != nil {
		opts.Log.Warn("mesh: sign descriptor", "err", err)
		return
	}
	if err := mp.m.SetLocalDescriptor(signed.JWS); err != nil {
		opts.Log.Warn("mesh: set descriptor", "err", err)
	}
	if mp.announcer != nil {
		mp.announcer.Set(signed)
	}
}

// openAnnouncer loads (or makes) the home's announcement key and checks
// [mesh] announce_relays.
func openAnnouncer(opts Options) (*announce.Announcer, error) {
	key, err := announce.LoadOrCreateKey(opts.Home.Path(announce.KeyFile))
	if err != nil {
		return nil, err
	}
	a, err := announce.NewAnnouncer(key, opts.Config.Mesh.AnnounceRelays, opts.Log)
	if err != nil {
		return nil, fmt.Errorf("[mesh] announce_relays: %w", err)
	}
	return a, nil
}

// addrs are the node's mesh multiaddrs with its PeerID, as a peer would
// use them to bootstrap.
func (mp *meshPart) addrs() []string {
	h := mp.m.Host()
	var out []string
	for _, a := range h.Addrs() {
		out = append(out, a.String()+"/p2p/"+h.ID().String())
	}
	return out
}

func (mp *meshPart) close() error {
	if mp.cancel != nil {
		mp.cancel()
	}
	mp.wg.Wait()
	mp.sync.Close()
	return mp.m.Close()
}

// MeshDebug is what /debug/mesh serves: the node's NAT status and its
// connections, so an operator (or a test) can see whether a peer is
// reached directly or through a relay.
type MeshDebug struct {
	PeerID       string            `json:"peer_id"`
	Class        string            `json:"class"`
	ClassConfig  string            `json:"class_config"`
	Reachability string            `json:"reachability"`
	RelayService bool              `json:"relay_service"`
	Relays       []string          `json:"relays"`
	Addrs        []string          `json:"addrs"`
	Connections  []MeshConnection  `json:"connections"`
	Stats        map[string]uint64 `json:"stats"`
}

// MeshConnection is one open libp2p connection.
type MeshConnection struct {
	Peer      string `json:"peer"`
	Addr      string `json:"addr"`
	Direction string `json:"direction"`
	// Relayed is set for a connection through a circuit relay
	// (/p2p-circuit); a hole-punched or dialled connection is direct.
	Relayed bool `json:"relayed"`
	// Limited is set when the relay limits the connection's duration and
	// data (circuit relay v2 limits).
	Limited bool `json:"limited"`
}

func (mp *meshPart) debug() MeshDebug {
	h := mp.m.Host()
	st := mp.m.NATStatus()
	stats := mp.m.Stats()
	d := MeshDebug{
		PeerID:       h.ID().String(),
		Class:        string(mp.class(st)),
		ClassConfig:  mp.cfg.Class,
		Reachability: strings.ToLower(st.Reachability.String()),
		RelayService: st.RelayService,
		Relays:       []string{},
		Addrs:        mp.addrs(),
		Connections:  []MeshConnection{},
		Stats: map[string]uint64{
			"reachability_changes":       stats.ReachabilityChanges,
			"relay_reservations":         stats.RelayReservations,
			"relay_reservations_served":  stats.RelayReservationsServed,
			"relay_reservations_refused": stats.RelayReservationsRefused,
			"relay_circuits":             stats.RelayCircuits,
			"relay_circuits_refused":     stats.RelayCircuitsRefused,
			"relay_bytes":                stats.RelayBytes,
			"hole_punch_successes":       stats.HolePunchSuccesses,
			"hole_punch_failures":        stats.HolePunchFailures,
		},
	}
	for _, r := range st.Relays {
		d.Relays = append(d.Relays, r.String())
	}
	for _, c := range h.Network().Conns() {
		_, circuitErr := c.RemoteMultiaddr().ValueForProtocol(ma.P_CIRCUIT)
		d.Connections = append(d.Connections, MeshConnection{
			Peer:      c.RemotePeer().String(),
			Addr:      c.RemoteMultiaddr().String(),
			Direction: strings.ToLower(c.Stat().Direction.String()),
			Relayed:   circuitErr == nil,
			Limited:   c.Stat().Limited,
		})
	}
	return d
}

func (mp *meshPart) serveDebug(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(mp.debug())
}

// registerMetrics exports the mesh's NAT traversal state and counters.
func (mp *meshPart) registerMetrics(reg prometheus.Registerer) {
	m := mp.m
	counter := func(name, help string, f func(mesh.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: name, Help: help},
			func() float64 { return float64(f(m.Stats())) })
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: "reachability",
			Help: "Observed reachability: 0 unknown, 1 public, 2 private."},
			func() float64 { return float64(m.NATStatus().Reachability) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: "relay_service",
			Help: "1 while this node relays circuits for others."},
			func() float64 {
				if m.NATStatus().RelayService {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: "relay_reservations_held",
			Help: "Relays this node holds a reservation with."},
			func() float64 { return float64(len(m.NATStatus().Relays)) }),
		counter("reachability_changes_total", "Changes of the observed reachability.", func(s mesh.Stats) uint64 { return s.ReachabilityChanges }),
		counter("relay_reservations_total", "Reservations obtained from relays.", func(s mesh.Stats) uint64 { return s.RelayReservations }),
		counter("relay_reservations_served_total", "Reservations this node's relay service granted.", func(s mesh.Stats) uint64 { return s.RelayReservationsServed }),
		counter("relay_reservations_refused_total", "Reservations this node's relay service refused.", func(s mesh.Stats) uint64 { return s.RelayReservationsRefused }),
		counter("relay_circuits_total", "Circuits this node's relay service opened.", func(s mesh.Stats) uint64 { return s.RelayCircuits }),
		counter("relay_circuits_refused_total", "Circuits this node's relay service refused.", func(s mesh.Stats) uint64 { return s.RelayCircuitsRefused }),
		counter("relay_bytes_total", "Bytes this node's relay service relayed.", func(s mesh.Stats) uint64 { return s.RelayBytes }),
		counter("hole_punch_successes_total", "DCUtR hole punches that ended in a direct connection.", func(s mesh.Stats) uint64 { return s.HolePunchSuccesses }),
		counter("hole_punch_failures_total", "DCUtR hole punches that failed.", func(s mesh.Stats) uint64 { return s.HolePunchFailures }),
		counter("peers_banned_total", "Peers disconnected and refused for a while for misbehaviour (spec/limits.md).", func(s mesh.Stats) uint64 { return s.PeersBanned }),
	)
	for _, reason := range []string{mesh.MisbehaviorInvalidGossip, mesh.MisbehaviorPEXViolation, mesh.MisbehaviorPEXFlood, mesh.MisbehaviorStreamsRefuse} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: "misbehavior_total",
			Help: "Penalties given to peers for misbehaviour, by reason.", ConstLabels: prometheus.Labels{"reason": reason}},
			func() float64 { return float64(m.Stats().Misbehavior[reason]) }))
	}
}
