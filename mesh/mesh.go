package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh/addrbook"
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
	VerifyDescriptor DescriptorVerifier
	// Logger receives debug and warning logs; nil discards them.
	Logger *slog.Logger
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
	book *addrbook.Book
	pex  *pex
	disc *discovery

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	topics map[int]*pubsub.Topic
	subs   map[int]context.CancelFunc
}

// Open builds the node's libp2p host from key and cfg (see NewHost) and
// starts the mesh on it. Close stops both.
func Open(key *identity.Key, cfg Config, hooks Hooks) (*Mesh, error) {
	h, err := NewHost(key, cfg)
	if err != nil {
		return nil, err
	}
	m, err := New(h, cfg, hooks)
	if err != nil {
		h.Close()
		return nil, err
	}
	m.ownsHost = true
	return m, nil
}

// New starts the mesh on an existing host (tests use mocknet hosts). The
// caller keeps owning h: Close stops the mesh but leaves h open.
func New(h host.Host, cfg Config, hooks Hooks) (*Mesh, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if hooks.Sink == nil {
		return nil, errors.New("mesh: Hooks.Sink is required")
	}
	cfg = cfg.withDefaults()
	m := &Mesh{
		h:      h,
		cfg:    cfg,
		sink:   hooks.Sink,
		policy: hooks.Policy,
		log:    hooks.Logger,
		stats:  newCounters(cfg.MaxReasons),
		mesh:   &meshPeers{topics: map[string]map[peer.ID]bool{}},
		topics: make(map[int]*pubsub.Topic),
		subs:   make(map[int]context.CancelFunc),
	}
	if m.policy == nil {
		m.policy = func(*nostr.Event) (bool, string) { return true, "" }
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if err := m.start(hooks); err != nil {
		m.Close()
		return nil, err
	}
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
		m.dht, err = dht.New(m.h,
			dht.ProtocolPrefix(DHTProtocolPrefix),
			dht.Mode(mode),
			dht.BootstrapPeersFunc(m.knownPeers),
		)
		if err != nil {
			return fmt.Errorf("mesh: DHT: %w", err)
		}
	}
	opts := []pubsub.Option{
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithNoAuthor(),
		pubsub.WithMessageIdFn(messageID),
		pubsub.WithMaxMessageSize(max(1<<20, m.cfg.MaxMessageBytes+64<<10)),
		pubsub.WithPeerScore(peerScoreParams(), peerScoreThresholds()),
		pubsub.WithDefaultValidator(m.validate),
		pubsub.WithRawTracer(rpcTracer{c: m.stats, mesh: m.mesh}),
		pubsub.WithSubscriptionFilter(pubsub.WrapLimitSubscriptionFilter(
			pubsub.NewRegexpSubscriptionFilter(regexp.MustCompile("^"+regexp.QuoteMeta(TopicPrefix)+"(0|[1-9][0-9]{0,2})$")),
			ShardCount)),
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
	if hooks.VerifyDescriptor != nil {
		m.pex = newPEX(m, hooks.VerifyDescriptor)
		m.h.SetStreamHandler(PEXProtocol, m.pex.handle)
	}
	m.disc, err = newDiscovery(m)
	if err != nil {
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

// MeshPeers returns the peers in this node's GossipSub mesh for shard:
// the peers it forwards the shard's events to in full (others get only
// gossip about them). A subscribed shard with no mesh peers receives
// nothing live.
func (m *Mesh) MeshPeers(shard int) []peer.ID {
	return m.mesh.list(Topic(shard))
}

// Host returns the libp2p host.
func (m *Mesh) Host() host.Host { return m.h }

// Stats returns a snapshot of the mesh's counters.
func (m *Mesh) Stats() Stats { return m.stats.snapshot() }

// Publish replicates ev to the mesh on its author's shard. The event must
// verify; ephemeral events and events the Policy refuses are not sent
// (ErrEphemeral, ErrRefused). Publishing does not need a subscription to
// the shard. Nil is returned once the event is handed to GossipSub; if no
// peer of the shard is known yet, it reaches them later only through
// anti-entropy.
func (m *Mesh) Publish(ctx context.Context, ev *nostr.Event) error {
	if nostr.ClassOf(ev.Kind) == nostr.Ephemeral {
		return fmt.Errorf("mesh: publish %s: %w", ev.IDHex(), ErrEphemeral)
	}
	if err := ev.Verify(); err != nil {
		return fmt.Errorf("mesh: publish %s: %w: %v", ev.IDHex(), ErrInvalidEvent, err)
	}
	if ok, reason := m.policy(ev); !ok {
		m.stats.refused(Outbound, reason)
		return fmt.Errorf("mesh: publish %s: %w: %s", ev.IDHex(), ErrRefused, reason)
	}
	data := ev.AppendJSON(nil)
	if len(data) > m.cfg.MaxMessageBytes {
		return fmt.Errorf("mesh: publish %s: %w: %d bytes, at most %d", ev.IDHex(), ErrTooLarge, len(data), m.cfg.MaxMessageBytes)
	}
	t, err := m.topic(ShardOf(ev.PubKey))
	if err != nil {
		return err
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

// Subscribe makes the node receive the events of shards (see ShardsFor),
// handing each to the Sink. Subscribing to a shard twice is a no-op.
func (m *Mesh) Subscribe(shards ...int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range shards {
		if _, ok := m.subs[s]; ok {
			continue
		}
		t, err := m.topicLocked(s)
		if err != nil {
			return err
		}
		sub, err := t.Subscribe(pubsub.WithBufferSize(m.cfg.SubscriptionBuffer))
		if err != nil {
			return fmt.Errorf("mesh: subscribe %s: %w", Topic(s), err)
		}
		ctx, cancel := context.WithCancel(m.ctx)
		m.subs[s] = cancel
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer sub.Cancel()
			m.deliver(ctx, sub)
		}()
	}
	return nil
}

// Unsubscribe stops receiving the events of shards.
func (m *Mesh) Unsubscribe(shards ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range shards {
		if cancel, ok := m.subs[s]; ok {
			cancel()
			delete(m.subs, s)
		}
	}
}

// Subscribed returns the subscribed shards in increasing order.
func (m *Mesh) Subscribed() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int, 0, len(m.subs))
	for s := range m.subs {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// deliver hands the events of one subscription to the Sink until ctx ends.
func (m *Mesh) deliver(ctx context.Context, sub *pubsub.Subscription) {
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			return
		}
		if msg.Local {
			continue // our own publication: the node already holds it
		}
		ev, ok := msg.ValidatorData.(*nostr.Event)
		if !ok {
			continue
		}
		if err := m.sink.Ingest(ctx, ev, msg.ReceivedFrom); err != nil {
			m.stats.add(func(s *Stats) { s.SinkErrors++ })
			m.log.Warn("sink refused a replicated event", "id", ev.IDHex(), "from", msg.ReceivedFrom, "err", err)
			continue
		}
		m.stats.add(func(s *Stats) { s.Delivered++ })
	}
}

// SetLocalDescriptor sets the signed descriptor this node hands out in peer
// exchange. It must verify with Hooks.VerifyDescriptor and name this node.
// The node calls it again whenever it re-signs its descriptor.
func (m *Mesh) SetLocalDescriptor(raw []byte) error {
	if m.pex == nil {
		return errNoPEX
	}
	return m.pex.setSelf(raw)
}

// Descriptor returns the newest verified, unexpired descriptor the mesh
// holds for id (this node's own included).
func (m *Mesh) Descriptor(id peer.ID) ([]byte, bool) {
	if m.pex == nil {
		return nil, false
	}
	return m.pex.descriptor(id)
}

// ExchangeDescriptors runs one peer exchange with a connected peer and
// returns how many new or newer descriptors it learnt.
func (m *Mesh) ExchangeDescriptors(ctx context.Context, id peer.ID) (int, error) {
	if m.pex == nil {
		return 0, errNoPEX
	}
	return m.pex.exchange(ctx, id)
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
		m.h.RemoveStreamHandler(PEXProtocol)
	}
	if m.disc != nil {
		errs = append(errs, m.disc.close())
	}
	m.wg.Wait()
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
	return errors.Join(errs...)
}
