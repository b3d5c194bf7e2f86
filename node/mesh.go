package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// MeshDir holds the mesh's state (the address book) in a node home.
const MeshDir = "mesh"

// DHTDir holds, in a node home, the DHT's provider records: the holders
// other nodes announced for events (a Pebble database of the mesh's own).
// They are not part of a backup: they are others' announcements, kept 48
// hours, and a live database copied file by file could be torn.
const DHTDir = MeshDir + "/dht"

// meshPart is the node's mesh side: the mesh itself, the sync service and
// the scheduler of its sessions (meshsync), the node's own descriptor
// (node/selfdescriptor.go), and the hooks that connect them to the relay.
type meshPart struct {
	m      *mesh.Mesh
	sync   *meshsync.Service
	rounds *meshsync.Scheduler
	self   *selfDescriptor
	// interest follows what the node's own clients subscribe to; nil
	// when [mesh] client_shards is 0.
	interest *clientInterest
	// st and reprovide drive the re-announcement of durably held events
	// (node/reprovide.go); reprovide 0 turns it off.
	st        EventStore
	reprovide time.Duration

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// meshLocal is the node's store and relay as meshsync needs them:
// replicated events enter through the relay, which verifies, stores and
// delivers them to live subscribers.
type meshLocal struct {
	EventStore
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

func openMesh(opts Options, st EventStore, rl *relay.Relay, policy *boundary.Policy, acct *accountingPart) (_ *meshPart, err error) {
	mc := opts.Config.Mesh
	sched, err := mc.SyncScheduler()
	if err != nil {
		return nil, err
	}
	maintain := mc.MaintainInterval.Duration
	local := meshLocal{EventStore: st, r: rl}
	mcfg := mesh.Config{
		ListenAddrs: append([]string{}, mc.Listen...),
		// The defaults move to a free port when another node holds 4001;
		// addresses an operator wrote are refused when held.
		ListenFallback: slices.Equal(mc.Listen, mesh.DefaultListenAddrs()),
		Bootstrap:      mc.Bootstrap,
		MDNS:           mdnsMode(opts.Config),
		DHT:            mesh.DHTMode(mc.DHT),
		AddrBookDir:    opts.Home.Path(MeshDir),
		DHTDir:         opts.Home.Path(DHTDir),
		// Zero takes the mesh's default. The address book is saved as often
		// as connections are maintained, so a node killed without warning
		// still finds its recent peers on restart.
		MaintainInterval:     maintain,
		AddrBookSaveInterval: maintain,
		Durability:           mesh.DurabilityConfig{Replication: mc.Replication},
		// The mesh keeps to its share of the file limit, so that it and
		// the relay's clients never take the store's (spec/limits.md).
		MaxFDs:        rl.FileBudget().Mesh,
		GossipTracer:  meter.GossipTracer(acct.meter),
		LimitLoopback: mc.LimitLoopback,
		Circuits:      acct.circuitHooks(),
	}
	applyNATConfig(&mcfg, opts.Config)
	// The descriptor exists before the mesh, whose NAT changes ask for it
	// to be signed again; it signs only once start has run.
	self := newSelfDescriptor(opts)
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
		OnNATChange:      func(mesh.NATStatus) { self.resign() },
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	// The one cleanup path: whatever fails below closes the mesh.
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	self.m = m
	if err := m.Subscribe(mesh.ShardsFor(sched.Filters)...); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	svc := meshsync.New(m.Host(), local, policy, meshsync.Config{Meter: acct.meter, Allow: acct.allow, Receipts: acct.page,
		Penalize:    func(p peer.ID) { m.Penalize(p, mesh.MisbehaviorSyncViolation) },
		LookupGrace: mc.LookupGrace.Duration, Unanswered: m.ReportUnreachable}, opts.Log)
	mp := &meshPart{
		m:         m,
		sync:      svc,
		rounds:    meshsync.NewScheduler(svc, m, sched, opts.Log),
		self:      self,
		st:        st,
		reprovide: mc.ReprovideInterval.Duration,
	}
	if len(mc.AnnounceRelays) > 0 {
		if self.announcer, err = openAnnouncer(opts); err != nil {
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
// published, in durably held shards announced, and pushed to relayed
// peers; REQs look up what the node lacks.
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
	rl.OnStored = append(rl.OnStored, func(ev *nostr.Event, _ relay.Origin) { mp.rounds.Stored(ev) })
	if mp.rounds.Lookups() {
		rl.Lookup = func(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event)) {
			mp.rounds.Lookup(ctx, f, limit, fn)
		}
	}
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

// mdnsMode is when the node runs mDNS: with mdns "auto", while it is home
// class (always for class home, while not publicly reachable for class
// auto), and never for an anchor, whose LAN is a provider's network with
// nobody of its own on it, or a leaf, which carries one identity from one
// network to the next and would announce it on each.
func mdnsMode(cfg config.Config) mesh.MDNSMode {
	switch cfg.Mesh.MDNS {
	case setting.On:
		return mesh.MDNSOn
	case setting.Off:
		return mesh.MDNSOff
	}
	switch cfg.Class {
	case config.ClassHome:
		return mesh.MDNSOn
	case config.ClassAnchor, config.ClassLeaf:
		return mesh.MDNSOff
	default:
		return mesh.MDNSWhilePrivate
	}
}

// start signs the node's descriptor and starts the mesh part's loops: the
// descriptor's re-signing, client interest, re-announcement, the
// announcer, and the sync scheduler (anti-entropy rounds, durable
// co-holder sync, the push to relayed peers).
func (mp *meshPart) start(relayURL string) {
	ctx, cancel := context.WithCancel(context.Background())
	mp.cancel = cancel
	// Peers learn of this node through peer exchange from the start.
	mp.self.publish(relayURL)
	// Every goroutine of the mesh part is started here and waited for by
	// close.
	run := func(f func()) {
		mp.wg.Add(1)
		go func() {
			defer mp.wg.Done()
			f()
		}()
	}
	every := mp.rounds.Config().Every
	run(func() { mp.self.run(ctx, every, relayURL) })
	if mp.st != nil && storageOffer(mp.self.cfg) != nil {
		run(func() { mp.self.watchStorage(ctx, mp.st.DiskBytes, mp.st.MaxBytes) })
	}
	if mp.interest != nil {
		run(func() { mp.interest.run(ctx) })
	}
	run(func() { mp.runReprovide(ctx, mp.st, mp.reprovide, mp.self.log) })
	if a := mp.self.announcer; a != nil {
		run(func() { a.Run(ctx) })
	}
	run(func() { mp.rounds.Run(ctx) })
}

// addrs are the node's mesh multiaddrs with its PeerID, as a peer would
// use them to bootstrap.
func (mp *meshPart) addrs() []string { return meshAddrs(mp.m.Host()) }

func (mp *meshPart) close() error {
	if mp.cancel != nil {
		mp.cancel()
	}
	mp.wg.Wait()
	mp.sync.Close()
	return mp.m.Close()
}

// MDNS is when the node runs mDNS discovery: from [mesh] mdns and, for
// auto, its class.
func (n *Node) MDNS() mesh.MDNSMode { return mdnsMode(n.opts.Config) }
