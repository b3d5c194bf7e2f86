package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"

	pebbleds "github.com/ipfs/go-ds-pebble"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh/addrbook"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/nostr"
)

// DHTProtocolPrefix is the protocol prefix of fleetmesh's Kademlia DHT, so
// that it forms its own DHT rather than joining the IPFS one.
const DHTProtocolPrefix protocol.ID = "/fleetmesh"

// Hooks are what the node plugs into the mesh.
type Hooks struct {
	// Sink receives replicated events. Required.
	Sink Sink
	// Policy is applied to every event replicated in either direction;
	// nil allows everything.
	Policy Policy
	// VerifyDescriptor verifies signed node descriptors for peer exchange;
	// nil turns peer exchange off.
	VerifyDescriptor peerexchange.Verifier
	// Logger receives debug and warning logs; nil discards them.
	Logger *slog.Logger
	// OnNATChange, if set, is called whenever the node's NATStatus or its
	// own addresses change, one call at a time and in order, so that the
	// node can re-sign what it declares. It must not block for long.
	OnNATChange func(NATStatus)
}

// Mesh is one node's part of the fleetmesh mesh: discovery and connection
// upkeep, peer exchange, and live replication of events over GossipSub.
// Its methods are safe for concurrent use.
type Mesh struct {
	h        host.Host
	ownsHost bool
	cfg      Config
	sink     Sink
	policy   Policy
	log      *slog.Logger
	stats    *counters
	mesh     *meshPeers

	boot []peer.AddrInfo
	ps   *pubsub.PubSub
	dht  *dht.IpfsDHT
	// dhtStore holds the DHT's records on disk (Config.DHTDir); nil keeps
	// them in memory.
	dhtStore *pebbleds.Datastore
	book     *addrbook.Book
	pex      *peerexchange.Service
	disc     *discovery
	nat      *nat
	misb     *misbehavior
	// placer and prov are nil without peer exchange and without a DHT.
	placer *placer
	prov   *provider
	// live judges storage nodes down; nil without peer exchange.
	live *liveness
	// bw counts bytes per protocol on a host made by Open; nil otherwise.
	bw *metrics.BandwidthCounter
	// standing scores peers in GossipSub (SetStanding); nil: all 0.
	standing atomic.Pointer[func(peer.ID) float64]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	topics map[int]*pubsub.Topic
	subs   map[int]context.CancelFunc
	// A shard is subscribed while the node's own filters need it (own)
	// or it holds the shard for durability (durable), or both.
	own     map[int]bool
	durable map[int]bool
	// interest are the shards the node's own clients subscribe to now
	// (SetInterest).
	interest map[int]bool
}

// Open builds the node's libp2p host from key and cfg (see NewHost) and
// starts the mesh on it. Close stops both. Only a host made here gets
// relay candidates from peer exchange and counts hole punches.
func Open(key *identity.Key, cfg Config, hooks Hooks) (*Mesh, error) {
	m, err := newMesh(cfg, hooks)
	if err != nil {
		return nil, err
	}
	m.bw = metrics.NewBandwidthCounter()
	if m.cfg.ListenFallback {
		m.cfg.ListenAddrs = m.fallBack(m.cfg.ListenAddrs, false)
	}
	h, err := newHost(key, m.cfg, m.nat, resourceReporter{m.misb}, m.bw, banGater{m.misb})
	if errors.Is(err, ErrListenAddrInUse) && m.cfg.ListenFallback {
		// Taken between the check and the bind (another node starting at
		// the same moment): once more, on free ports.
		m.cfg.ListenAddrs = m.fallBack(m.cfg.ListenAddrs, true)
		h, err = newHost(key, m.cfg, m.nat, resourceReporter{m.misb}, m.bw, banGater{m.misb})
	}
	if err != nil {
		m.cancel()
		return nil, err
	}
	m.h = h
	m.ownsHost = true
	if err := m.start(hooks); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// New starts the mesh on an existing host (tests use mocknet hosts). The
// caller keeps owning h: Close stops the mesh but leaves h open.
func New(h host.Host, cfg Config, hooks Hooks) (*Mesh, error) {
	m, err := newMesh(cfg, hooks)
	if err != nil {
		return nil, err
	}
	m.h = h
	if err := m.start(hooks); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// newMesh checks cfg and hooks and makes a mesh with no host yet.
func newMesh(cfg Config, hooks Hooks) (*Mesh, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if hooks.Sink == nil {
		return nil, errors.New("mesh: Hooks.Sink is required")
	}
	cfg = cfg.withDefaults()
	m := &Mesh{
		cfg:    cfg,
		sink:   hooks.Sink,
		policy: hooks.Policy,
		log:    hooks.Logger,
		stats:  newCounters(cfg.MaxReasons),
		mesh:   &meshPeers{topics: map[string]map[peer.ID]bool{}},
		topics: make(map[int]*pubsub.Topic),
		subs:   make(map[int]context.CancelFunc),
	}
	m.own, m.durable, m.interest = make(map[int]bool), make(map[int]bool), make(map[int]bool)
	if m.policy == nil {
		m.policy = func(*nostr.Event) (bool, string) { return true, "" }
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if m.nat, err = newNAT(cfg, m.log, m.stats); err != nil {
		return nil, err
	}
	m.misb = newMisbehavior(m)
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

func (m *Mesh) start(hooks Hooks) error {
	var err error
	m.book, err = addrbook.Open(addrbook.Config{Dir: m.cfg.AddrBookDir, MaxPeers: m.cfg.AddrBookMaxPeers})
	if err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	m.boot, err = m.cfg.bootstrapPeers()
	if err != nil {
		return err
	}
	if m.cfg.DHT != DHTOff {
		mode := map[DHTMode]dht.ModeOpt{DHTAuto: dht.ModeAuto, DHTServer: dht.ModeServer, DHTClient: dht.ModeClient}[m.cfg.DHT]
		dopts := []dht.Option{dht.ProtocolPrefix(DHTProtocolPrefix),
			dht.Mode(mode),
			// The DHT's source of peers to bootstrap from when its
			// routing table is empty.
			dht.BootstrapPeersFunc(func() []peer.AddrInfo { return m.KnownPeers(len(m.boot) + m.cfg.ReconnectPeers) }),
		}
		if m.cfg.DHTDir != "" && m.ownsHost {
			if m.dhtStore, err = openDHTStore(m.cfg.DHTDir, m.log); err != nil {
				return err
			}
			dopts = append(dopts, dht.Datastore(m.dhtStore))
		}
		m.dht, err = dht.New(m.h, dopts...)
		if err != nil {
			return fmt.Errorf("mesh: DHT: %w", err)
		}
	}
	opts := []pubsub.Option{
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithNoAuthor(),
		pubsub.WithMessageIdFn(messageID),
		pubsub.WithMaxMessageSize(max(1<<20, m.cfg.MaxMessageBytes+64<<10)),
		pubsub.WithPeerScore(peerScoreParams(m.standingOf), peerScoreThresholds()),
		pubsub.WithDefaultValidator(m.validate),
		pubsub.WithRawTracer(rpcTracer{c: m.stats, mesh: m.mesh}),
		pubsub.WithPeerOutboundQueueSize(peerOutboundQueue),
		pubsub.WithSubscriptionFilter(pubsub.WrapLimitSubscriptionFilter(
			pubsub.NewRegexpSubscriptionFilter(regexp.MustCompile("^"+regexp.QuoteMeta(TopicPrefix)+"(0|[1-9][0-9]{0,2})$")),
			ShardCount)),
	}
	if m.cfg.GossipTracer != nil {
		opts = append(opts, pubsub.WithRawTracer(m.cfg.GossipTracer)) // metering (package meter)
	}
	if m.dht != nil && !m.cfg.DisableTopicDiscovery {
		rt := m.dht.RoutingTable()
		disc, err := topicDiscovery(drouting.NewRoutingDiscovery(m.dht), func() bool { return rt.Size() > 0 })
		if err != nil {
			return fmt.Errorf("mesh: topic discovery: %w", err)
		}
		opts = append(opts, pubsub.WithDiscovery(disc))
	}
	m.ps, err = pubsub.NewGossipSub(m.ctx, m.h, opts...)
	if err != nil {
		return fmt.Errorf("mesh: GossipSub: %w", err)
	}
	m.disc = newDiscovery(m)
	if hooks.VerifyDescriptor != nil {
		m.placer = newPlacer(m)
		m.pex = peerexchange.New(m.h, m.cfg.peerExchange(), hooks.VerifyDescriptor, m.pexHooks())
		m.h.SetStreamHandler(peerexchange.Protocol, m.pex.Handle)
		m.goroutine(m.placer.run)
		m.goroutine(m.pex.Run)
		m.live = newLiveness(m)
		if err := m.live.start(); err != nil {
			return err
		}
	}
	if m.dht != nil {
		m.prov = newProvider(m)
		m.goroutine(m.prov.run)
	}
	m.goroutine(m.misb.run)
	if err := m.disc.start(); err != nil {
		return err
	}
	if err := m.nat.start(m, hooks.OnNATChange); err != nil {
		return err
	}
	if m.dht != nil {
		if err := m.dht.Bootstrap(m.ctx); err != nil {
			return fmt.Errorf("mesh: DHT bootstrap: %w", err)
		}
	}
	return nil
}

// goroutine runs f in a goroutine that Close waits for; f must return once
// its context is done.
func (m *Mesh) goroutine(f func(ctx context.Context)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f(m.ctx)
	}()
}

// Host returns the libp2p host.
func (m *Mesh) Host() host.Host { return m.h }

// NATStatus returns the node's reachability and relaying now.
func (m *Mesh) NATStatus() NATStatus { return m.nat.snapshot() }

// RelayLimits are the limits the node's relay service applies when it
// runs, after defaults.
func (m *Mesh) RelayLimits() RelayLimits { return m.cfg.RelayLimits }

// Stats returns a snapshot of the mesh's counters.
func (m *Mesh) Stats() Stats {
	s := m.stats.snapshot()
	if m.pex != nil {
		c := m.pex.Counts()
		s.DescriptorsAccepted, s.DescriptorsRejected, s.DescriptorsSent = c.Accepted, c.Rejected, c.Sent
	}
	return s
}

// Publish replicates ev to the mesh on its author's shard. The caller must
// have verified ev, its id and its signature (the node publishes only events
// its store accepted, and the store takes only verified events): Publish
// checks neither again, because on a relay's ingest path the second check
// cost as much as all the rest, and every receiver checks both anyway.
// Ephemeral events and events the Policy refuses are not sent (ErrEphemeral,
// ErrRefused); an event whose JSON is over Config.MaxMessageBytes is refused
// with ErrTooLarge when the shard has a peer to send it to. Publishing does
// not need a subscription to the shard. Nil is returned once the event is
// handed to GossipSub; if no peer of the shard is known yet, it reaches them
// later only through anti-entropy.
func (m *Mesh) Publish(ctx context.Context, ev *nostr.Event) error {
	if nostr.ClassOf(ev.Kind) == nostr.Ephemeral {
		return fmt.Errorf("mesh: publish %s: %w", ev.IDHex(), ErrEphemeral)
	}
	if ok, reason := m.policy(ev); !ok {
		m.stats.refused(Outbound, reason)
		return fmt.Errorf("mesh: publish %s: %w: %s", ev.IDHex(), ErrRefused, reason)
	}
	t, err := m.topic(ShardOf(ev.PubKey))
	if err != nil {
		return err
	}
	if len(t.ListPeers()) == 0 {
		// No peer of the shard to send it to: GossipSub would only run it
		// through its pipeline and cache it for gossip to nobody, and the
		// encoding would be thrown away.
		m.stats.add(func(s *Stats) { s.PublishedAlone++ })
		return nil
	}
	data := ev.AppendJSON(nil)
	if len(data) > m.cfg.MaxMessageBytes {
		return fmt.Errorf("mesh: publish %s: %w: %d bytes, at most %d", ev.IDHex(), ErrTooLarge, len(data), m.cfg.MaxMessageBytes)
	}
	if err := t.Publish(ctx, data, pubsub.WithValidatorData(ev)); err != nil {
		return fmt.Errorf("mesh: publish %s: %w", ev.IDHex(), err)
	}
	m.stats.add(func(s *Stats) { s.Published++ })
	return nil
}

// topic returns the joined topic of shard, joining it the first time.
func (m *Mesh) topic(shard int) (*pubsub.Topic, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.topicLocked(shard)
}

func (m *Mesh) topicLocked(shard int) (*pubsub.Topic, error) {
	if m.closed {
		return nil, ErrClosed
	}
	if shard < 0 || shard >= ShardCount {
		return nil, fmt.Errorf("mesh: shard %d out of range 0 to %d", shard, ShardCount-1)
	}
	if t, ok := m.topics[shard]; ok {
		return t, nil
	}
	t, err := m.ps.Join(Topic(shard))
	if err != nil {
		return nil, fmt.Errorf("mesh: join %s: %w", Topic(shard), err)
	}
	if err := t.SetScoreParams(topicScoreParams()); err != nil {
		t.Close()
		return nil, fmt.Errorf("mesh: score %s: %w", Topic(shard), err)
	}
	m.topics[shard] = t
	return t, nil
}

// Close stops the mesh: subscriptions, discovery, peer exchange and the
// DHT, and saves the address book. If the mesh was made by Open it closes
// the host too.
func (m *Mesh) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	for s, cancel := range m.subs {
		cancel()
		delete(m.subs, s)
	}
	m.mu.Unlock()
	m.cancel()
	var errs []error
	if m.pex != nil {
		m.h.RemoveStreamHandler(peerexchange.Protocol)
	}
	if m.disc != nil {
		errs = append(errs, m.disc.close())
	}
	if m.live != nil {
		errs = append(errs, m.live.close())
	}
	m.wg.Wait()
	if m.nat != nil {
		errs = append(errs, m.nat.close())
	}
	for _, t := range m.topics {
		// Subscriptions were cancelled above; a topic whose cancellation
		// has not reached GossipSub yet reports it, which is harmless.
		_ = t.Close()
	}
	if m.dht != nil {
		errs = append(errs, m.dht.Close())
	}
	if m.book != nil {
		errs = append(errs, m.book.Save())
	}
	if m.ownsHost {
		errs = append(errs, m.h.Close())
	}
	if m.dhtStore != nil {
		// After the host: a DHT handler still running may read it.
		errs = append(errs, m.dhtStore.Close())
	}
	return errors.Join(errs...)
}
