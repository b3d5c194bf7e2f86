package leaf

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"
)

// Defaults.
const (
	// DefaultBudgetMs is a wake's budget: Sync returns within it, before
	// the ~30 s iOS and Android give a background wake.
	DefaultBudgetMs = 25_000
	// DefaultMaxStoreBytes bounds the local event store.
	DefaultMaxStoreBytes = 64 << 20
	// DefaultDeliveryBatch is how many messages one pickup delivery asks
	// for (the mediator caps it at its own bound).
	DefaultDeliveryBatch = 100
)

// Eviction rules for Config.Eviction.
const (
	// EvictOldest evicts the events with the oldest created_at first.
	EvictOldest = "oldest"
	// EvictFirstStored evicts the events stored longest ago first.
	EvictFirstStored = "first-stored"
	// EvictRanked evicts the events the app's Ranker ranked lowest first.
	EvictRanked = "ranked"
)

// Config configures a leaf. Zero fields take the defaults.
type Config struct {
	// Dir holds leaf.db.
	Dir string
	// BudgetMs is a wake's budget in milliseconds.
	BudgetMs int64
	// MaxStoreBytes bounds the events kept locally (their JSON bytes).
	MaxStoreBytes int64
	// Eviction is the rule that chooses which events go when the store
	// is full: EvictOldest (default), EvictFirstStored or EvictRanked.
	Eviction string
	// DeliveryBatch is the messages asked for per pickup delivery.
	DeliveryBatch int64
	// WindowSecs is the accounting window in seconds: it must equal the
	// home nodes' `[accounting] window`, or they refuse the leaf's
	// receipts (spec/leaf.md "Receipts").
	WindowSecs int64
	// DisputePeriodSecs is how long after a window's end the leaf keeps
	// proposing its receipt before it reports the window disputed.
	DisputePeriodSecs int64
	// ServeBytes bounds the events one wake serves from the leaf's cache
	// to its homes, when the app allows serving (Leaf.SetServe).
	ServeBytes int64
}

// NewConfig returns the defaults with dir.
func NewConfig(dir string) *Config {
	return &Config{Dir: dir, BudgetMs: DefaultBudgetMs, MaxStoreBytes: DefaultMaxStoreBytes, Eviction: EvictOldest, DeliveryBatch: DefaultDeliveryBatch,
		WindowSecs: DefaultWindowSecs, DisputePeriodSecs: DefaultDisputePeriodSecs, ServeBytes: DefaultServeBytes}
}

func (c Config) filled() (Config, error) {
	if c.Dir == "" {
		return c, fmt.Errorf("leaf: Config.Dir is empty: give the directory for leaf.db")
	}
	if c.BudgetMs <= 0 {
		c.BudgetMs = DefaultBudgetMs
	}
	if c.MaxStoreBytes <= 0 {
		c.MaxStoreBytes = DefaultMaxStoreBytes
	}
	if c.DeliveryBatch <= 0 {
		c.DeliveryBatch = DefaultDeliveryBatch
	}
	if c.WindowSecs <= 0 {
		c.WindowSecs = DefaultWindowSecs
	}
	if c.DisputePeriodSecs <= 0 {
		c.DisputePeriodSecs = DefaultDisputePeriodSecs
	}
	if c.ServeBytes <= 0 {
		c.ServeBytes = DefaultServeBytes
	}
	switch c.Eviction {
	case "":
		c.Eviction = EvictOldest
	case EvictOldest, EvictFirstStored, EvictRanked:
	default:
		return c, fmt.Errorf("leaf: Config.Eviction %q: use %q, %q or %q", c.Eviction, EvictOldest, EvictFirstStored, EvictRanked)
	}
	return c, nil
}

// KeyStore holds the leaf's Ed25519 key. The app implements it with the
// platform's key storage.
type KeyStore interface {
	// Seed returns the leaf's 32-byte Ed25519 seed, creating and storing
	// one (NewSeed) the first time.
	Seed() ([]byte, error)
}

// Ranker ranks an event for EvictRanked: events with the lowest rank are
// evicted first. It is called once per event, when the event is stored.
type Ranker interface {
	Rank(kind int64, createdAt int64, size int64, pubkey string) int64
}

// Progress receives a wake's progress: stage is "dial", "pickup",
// "catchup", "outbox", "serve", "receipts" or "done"; done and total count that stage's items
// (total is -1 while unknown). It is called from the wake's goroutines,
// one call at a time, and must return quickly.
type Progress interface {
	OnProgress(stage string, done int64, total int64)
}

// Context cancels a wake, as context.Context would (gobind cannot carry a
// context.Context across the boundary). Cancel makes Sync return within
// 2 s, with what it finished so far.
type Context struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// NewContext returns a Context that is not cancelled.
func NewContext() *Context {
	ctx, cancel := context.WithCancel(context.Background())
	return &Context{ctx: ctx, cancel: cancel}
}

// Cancel cancels the wake using this Context.
func (c *Context) Cancel() { c.cancel() }

// Summary is what one wake did.
type Summary struct {
	// PickedUp is messages stored by this wake (duplicates not counted).
	PickedUp int64 `json:"picked_up"`
	// EventsFetched is events stored by this wake's catch-up.
	EventsFetched int64 `json:"events_fetched"`
	// OutboxSent is outbox entries acknowledged (OK true, or accepted by
	// the mediator) by this wake; OutboxLeft is what still waits.
	OutboxSent int64 `json:"outbox_sent"`
	OutboxLeft int64 `json:"outbox_left"`
	// DurationMs is the wake's time.
	DurationMs int64 `json:"duration_ms"`
	// CaughtUp says every subscription was reconciled with a home node
	// and every queue drained in this wake.
	CaughtUp bool `json:"caught_up"`
	// Method is how the catch-up ran: "negentropy", "since", or "" when
	// there was nothing to catch up.
	Method string `json:"method"`
	// BytesSent and BytesReceived count TCP payload both ways; Connections
	// the connections dialed; RoundTrips the request/answer exchanges.
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
	Connections   int64 `json:"connections"`
	RoundTrips    int64 `json:"round_trips"`
	// FirstPickupMs is when the first message was stored (-1: none).
	FirstPickupMs int64 `json:"first_pickup_ms"`
	// Receipts is the receipts co-signed with home nodes in this wake;
	// ReceiptsLeft the closed windows whose exchange waits for a later
	// wake (not ready at the home, in dispute, or no time left).
	Receipts     int64 `json:"receipts"`
	ReceiptsLeft int64 `json:"receipts_left"`
	// EventsServed is events from the leaf's cache its homes accepted in
	// this wake (serving, Leaf.SetServe).
	EventsServed int64 `json:"events_served"`
	// Stalls counts exchanges abandoned because the network went silent.
	Stalls int64 `json:"stalls"`
	// Cancelled says the wake was cancelled or ran out of budget.
	Cancelled bool `json:"cancelled"`
	// Error is the first error met, if any ("" when none).
	Error string `json:"error,omitempty"`
}

// JSON returns the summary as one line of JSON.
func (s *Summary) JSON() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// protect turns a panic in an exported call into an error, so none
// crosses the gobind boundary.
func protect(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("leaf: internal error: %v\n%s", r, debug.Stack())
	}
}

// progressMux serializes Progress calls.
type progressMux struct {
	mu sync.Mutex
	p  Progress
}

func (m *progressMux) report(stage string, done, total int64) {
	if m == nil || m.p == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	func() {
		defer func() { _ = recover() }() // an app callback's panic stays on its side
		m.p.OnProgress(stage, done, total)
	}()
}
