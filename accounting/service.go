package accounting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
)

// Config is the accounting settings: the [accounting] section of
// config.toml (package config embeds it, beside the defaults of
// `fleetmesh grants offer`), so each is declared here alone.
type Config struct {
	// Window is the accounting window, UTC-aligned: whole seconds, at
	// least 1s ("1h"; seconds in tests).
	Window setting.Duration `toml:"window" comment:"the accounting window, UTC-aligned, whole seconds"`
	// Tolerance is how far, as a fraction of this node's own figure, a
	// peer's count of one service may differ from it and still be signed
	// (exchange.Agree).
	Tolerance float64 `toml:"tolerance" comment:"how far, as a fraction, two sides' counts may differ and still be signed"`
	// Slack is how many units (events, and their bytes at this node's
	// mean event size) the sides may differ by whatever the tolerance:
	// events in flight at a boundary are counted in one window by the
	// sender and in the next by the receiver.
	Slack uint64 `toml:"slack" comment:"units two sides' counts may differ by whatever the tolerance (events in flight)"`
	// DisputePeriod is how long after a window's end its exchange may
	// go on; then unresolved windows are disputed and the window is
	// reported. 0 (or "" in older files) is one window.
	DisputePeriod setting.Duration `toml:"dispute_period" comment:"how long after a window its exchange may go on ('0s': one window)"`
	// DisputeRounds bounds the proposals of one window (rounds of the
	// dispute exchange); 0 is 3.
	DisputeRounds int `toml:"dispute_rounds" comment:"proposals of one window at most (0: 3)"`
	// LeafDisputePeriod is DisputePeriod for a pair with a leaf
	// (SetLeaves): a leaf proposes only when it wakes, so its windows
	// wait this long after their end before they are disputed. It is
	// not a key of the file.
	LeafDisputePeriod time.Duration `toml:"-"`
	// RequireGrant lists the services this node gives only under a grant.
	RequireGrant []meter.Service `toml:"require_grant" comment:"services this node gives only under a grant"`
	// AcceptGrants accepts grants offered to this node.
	AcceptGrants bool `toml:"accept_grants" comment:"accept grants offered to this node"`
	// MaxGrantsPerPeer bounds the grants one grantor has given this node
	// that it keeps (offered, active or ended); past it the grantor's
	// ended grants are dropped, and a further offer is declined.
	MaxGrantsPerPeer int `toml:"max_grants_per_peer" comment:"grants from one grantor this node keeps at most; more offers are declined"`
	// MaxGrants bounds the grants given to this node that it keeps, from
	// all grantors together.
	MaxGrants int `toml:"max_grants" comment:"grants given to this node it keeps at most, from all grantors"`
	// MaxForkProofs bounds the forkers (DIDs) whose fork proof this node
	// keeps from others; proofs it builds itself are always kept.
	MaxForkProofs int `toml:"max_fork_proofs" comment:"forkers whose fork proof this node keeps from others at most"`
	// FetchPerMinute bounds how often one address may make this node
	// fetch a node's receipts from the mesh (GET /accounting/receipts
	// ?fetch=1 on the relay port); past it the answer is 429.
	FetchPerMinute int `toml:"fetch_per_minute" comment:"mesh fetches one address may ask of the relay port a minute"`
}

// DefaultConfig is the settings a new node starts with.
func DefaultConfig() Config {
	return Config{Window: setting.DurationOf(time.Hour), Tolerance: 0.02, Slack: 2, DisputeRounds: 3,
		RequireGrant: []meter.Service{}, AcceptGrants: true,
		MaxGrantsPerPeer: 16, MaxGrants: 1024, MaxForkProofs: 10_000, FetchPerMinute: 10}
}

// Check refuses settings New would refuse or misread, naming the key.
func (c *Config) Check() error {
	if d := c.Window.Duration; d < time.Second || d%time.Second != 0 {
		return fmt.Errorf("window %s: write a whole number of seconds of at least 1s, e.g. \"1h\" or \"5s\"", c.Window)
	}
	if c.Tolerance < 0 || c.Tolerance >= 1 {
		return fmt.Errorf("tolerance %v: must be from 0 to below 1 (a fraction, e.g. 0.02)", c.Tolerance)
	}
	if c.DisputePeriod.Duration < 0 {
		return fmt.Errorf("dispute_period %s: write a duration of 0 or more, e.g. \"1h\"", c.DisputePeriod)
	}
	if c.DisputeRounds < 0 {
		return fmt.Errorf("dispute_rounds %d: must be >= 0 (0 = 3)", c.DisputeRounds)
	}
	for _, k := range []struct {
		name string
		v    int
	}{{"max_grants_per_peer", c.MaxGrantsPerPeer}, {"max_grants", c.MaxGrants}, {"max_fork_proofs", c.MaxForkProofs}, {"fetch_per_minute", c.FetchPerMinute}} {
		if k.v < 0 {
			return fmt.Errorf("%s %d: must be >= 0 (0 takes the default)", k.name, k.v)
		}
	}
	return nil
}

// DefaultLeafDisputePeriod is Config.LeafDisputePeriod unless set: a
// phone that stays asleep, offline or uninstalled for a week has its
// windows disputed, and until then they wait for its next wake.
const DefaultLeafDisputePeriod = 7 * 24 * time.Hour

// Service is a node's accounting. Its methods are safe for concurrent use.
type Service struct {
	key   *identity.Key
	did   string
	cfg   Config
	db    *db
	meter *meter.Meter
	agent *agent.Service
	host  host.Host
	log   *slog.Logger
	m     *metrics

	pairMu sync.Mutex
	pairs  map[string]*pairEntry // the b side's handlers, per pair, while any runs

	grantsMu sync.RWMutex
	given    map[peer.ID][]grantRecord // active grants this node gave, by grantee
	received int                       // grants given to this node that it keeps

	leaves atomic.Pointer[func(did string) bool] // SetLeaves

	closing []*meter.Window // rolled, to be snapshotted on the next tick (loop only)
	// readyBefore is the end of the windows whose figures are saved: b
	// answers proposals for those only.
	readyBefore atomic.Int64

	// now is the clock of grant states (time.Now; tests move it).
	now func() time.Time
	// fetcher asks a peer for a page of a node's records (SetFetcher);
	// pageReceipts and pageReports bound the pages this node answers
	// (receipt.MaxPageReceipts, MaxPageReports; tests lower them).
	fetcher                   atomic.Pointer[PageFetcher]
	pageReceipts, pageReports int

	// forkers counts the forkers whose proof is kept (bForkers); relay
	// queues kept proofs for relayForks (forkRelayQueue).
	forkers atomic.Int64
	relay   chan relayItem
	// contacts queues new connections for noteConnections (contact.go).
	contacts chan peer.ID

	cancel      context.CancelFunc
	stopRelay   context.CancelFunc
	wg, relayWG sync.WaitGroup
}

// New opens the accounting state under dir and registers the protocols on
// ag. h is the node's libp2p host, used to reach peers; m is the node's
// meter (built for cfg.Window).
func New(key *identity.Key, cfg Config, dir string, m *meter.Meter, ag *agent.Service, h host.Host, reg prometheus.Registerer, log *slog.Logger) (*Service, error) {
	if cfg.Window.Duration < time.Second {
		return nil, fmt.Errorf("accounting: window %s: must be at least 1s", cfg.Window)
	}
	if cfg.DisputePeriod.Duration <= 0 {
		cfg.DisputePeriod = cfg.Window
	}
	if cfg.DisputeRounds <= 0 {
		cfg.DisputeRounds = 3
	}
	def := DefaultConfig()
	for _, k := range []struct{ v, d *int }{{&cfg.MaxGrantsPerPeer, &def.MaxGrantsPerPeer}, {&cfg.MaxGrants, &def.MaxGrants},
		{&cfg.MaxForkProofs, &def.MaxForkProofs}, {&cfg.FetchPerMinute, &def.FetchPerMinute}} {
		if *k.v <= 0 {
			*k.v = *k.d
		}
	}
	if cfg.LeafDisputePeriod <= 0 {
		cfg.LeafDisputePeriod = DefaultLeafDisputePeriod
	}
	cfg.LeafDisputePeriod = max(cfg.LeafDisputePeriod, cfg.DisputePeriod.Duration)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d, err := openDB(dir)
	if err != nil {
		return nil, err
	}
	s := &Service{key: key, did: key.DID(), cfg: cfg, db: d, meter: m, agent: ag, host: h,
		log: log.With("component", "accounting"), m: newMetrics(reg),
		pairs: map[string]*pairEntry{}, now: time.Now,
		pageReceipts: receipt.MaxPageReceipts, pageReports: receipt.MaxPageReports,
		relay: make(chan relayItem, forkRelayQueue), contacts: make(chan peer.ID, contactQueue)}
	s.readyBefore.Store(m.Current().Start)
	if err := s.loadGrants(); err != nil {
		d.close()
		return nil, err
	}
	if err := s.loadForkers(); err != nil {
		d.close()
		return nil, fmt.Errorf("accounting: fork proofs: %w", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	s.stopRelay = stop
	s.relayWG.Go(func() { s.relayForks(rctx) })
	s.noteConnections(rctx)
	ag.Register(exchange.PIURIReceipt, s.handleReceipt, "proposer", "responder")
	ag.Register(exchange.PIURIDispute, s.handleDispute, "party")
	ag.Register(PIURIReport, s.handleReport, "requester", "responder")
	ag.Register(grantPIURI, s.handleGrant, "grantor", "grantee")
	return s, nil
}

// SetLeaves tells the service which counterparties are leaves (the DIDs
// this node mediates for): with a leaf the leaf proposes every window's
// receipt, whichever way the DIDs sort, and this node never proposes or
// asks it to, but waits for its wake (spec/leaf.md "Receipts").
func (s *Service) SetLeaves(isLeaf func(did string) bool) { s.leaves.Store(&isLeaf) }

func (s *Service) leaf(did string) bool {
	f := s.leaves.Load()
	return f != nil && *f != nil && (*f)(did)
}

// proposer is the side of the pair with peer that proposes its receipts:
// a leaf, else the DID sorting first.
func (s *Service) proposer(peer string) string {
	if s.leaf(peer) {
		return peer
	}
	a, _ := receipt.Pair(s.did, peer)
	return a
}

// DID is the node's DID.
func (s *Service) DID() string { return s.did }

// Meter is the node's meter.
func (s *Service) Meter() *meter.Meter { return s.meter }

// Start runs the window loop until Close.
func (s *Service) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.meter.Run(ctx)
	}()
	go func() {
		defer s.wg.Done()
		tick := s.tick()
		periodic.Run(ctx, tick, tick, nil, func() { s.Round(ctx, time.Now()) })
	}()
}

// tick is how often the loop runs: a fifth of a window, within 100ms
// and 10s.
func (s *Service) tick() time.Duration {
	return min(max(s.cfg.Window.Duration/5, 100*time.Millisecond), 10*time.Second)
}

// Close stops the loop, saves the figures counted so far (the windows
// closed but not yet saved, and the open window's part up to now, which a
// restart within that window adds to: spec/disputes.md "Stops") and
// closes the state.
func (s *Service) Close() error {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.stopRelay()
	s.relayWG.Wait()
	var errs []error
	for _, w := range append(s.closing, s.meter.Stop()...) {
		if err := s.snapshot(w); err != nil {
			errs = append(errs, fmt.Errorf("accounting: saving window %d at the stop: %w", w.Start, err))
		}
	}
	s.closing = nil
	return errors.Join(append(errs, s.db.close())...)
}

// Round runs one step of the window loop at now: snapshot the windows
// rolled by the previous step, roll the window if a boundary passed (the
// meter's own Run does so at the boundary when the loop runs), run the
// exchanges that are due, and publish the reports that are due.
func (s *Service) Round(ctx context.Context, now time.Time) {
	for len(s.closing) > 0 {
		w := s.closing[0]
		if err := s.snapshot(w); err != nil {
			s.log.Warn("accounting: saving a closed window", "window", w.Start, "err", err)
			break // in order: retried on the next step
		}
		s.readyBefore.Store(w.Start + s.meter.Length())
		s.closing = s.closing[1:]
		if err := s.pruneContacts(now); err != nil {
			s.log.Warn("accounting: pruning first contacts", "err", err)
		}
	}
	s.meter.Roll(s.meter.Align(now))
	s.closing = append(s.closing, s.meter.TakeClosed()...)
	s.exchange(ctx, now)
	if err := s.publishDue(now); err != nil {
		s.log.Warn("accounting: reports", "err", err)
	}
}

// pairEntry is one pair's lock and how many handlers hold or wait for
// it: the entry goes when the last one leaves, so the map holds only the
// pairs being handled now, however many DIDs have ever written.
type pairEntry struct {
	mu   sync.Mutex
	refs int
}

// lockPair serialises the b side's handlers of one pair; it returns the
// unlock.
func (s *Service) lockPair(pair string) func() {
	s.pairMu.Lock()
	e := s.pairs[pair]
	if e == nil {
		e = new(pairEntry)
		s.pairs[pair] = e
	}
	e.refs++
	s.pairMu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		s.pairMu.Lock()
		if e.refs--; e.refs == 0 {
			delete(s.pairs, pair)
		}
		s.pairMu.Unlock()
	}
}

// pairsHeld is how many pairs' entries the lock map holds.
func (s *Service) pairsHeld() int {
	s.pairMu.Lock()
	defer s.pairMu.Unlock()
	return len(s.pairs)
}
