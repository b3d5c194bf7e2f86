package relay

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// workBudget bounds the REQ, COUNT and NEG-OPEN work a connection or an
// address may ask of the store: query time and rows read, each a bucket
// that refills at a rate and holds at most workBurst seconds of it. A
// query is charged after it ran, so it may leave the bucket in debt; the
// next one waits until the debt is paid. This way one broad filter is
// never refused outright, but a loop of them gets the rate and no more,
// and slows only the party that sends it.
//
// golang.org/x/time/rate cannot do this: its reservations must be known
// before the work and no larger than the burst.
type workBudget struct {
	time bucket // in seconds of query time
	rows bucket // in events read
}

// workBurst is how many seconds of its rate a budget may save up.
const workBurst = 4

type bucket struct {
	rate   float64 // per second; 0 = unlimited
	tokens float64
	last   time.Time
}

func newBucket(rate float64) bucket {
	return bucket{rate: rate, tokens: rate * workBurst, last: time.Now()}
}

func (b *bucket) refill(now time.Time) {
	if b.rate <= 0 {
		return
	}
	b.tokens = math.Min(b.rate*workBurst, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
}

func (b *bucket) wait(now time.Time) time.Duration {
	b.refill(now)
	if b.rate <= 0 || b.tokens > 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

func (b *bucket) spend(now time.Time, n float64) {
	b.refill(now)
	if b.rate > 0 {
		// The debt is bounded so that one outsized query is paid off in
		// a bounded time.
		b.tokens = math.Max(-b.rate*maxDebtSeconds, b.tokens-n)
	}
}

// maxDebtSeconds bounds how far one query can put a budget in debt.
const maxDebtSeconds = 30

func newWorkBudget(millisPerSecond, rowsPerSecond int) workBudget {
	return workBudget{time: newBucket(float64(millisPerSecond) / 1000), rows: newBucket(float64(rowsPerSecond))}
}

func (w *workBudget) wait(now time.Time) time.Duration {
	return max(w.time.wait(now), w.rows.wait(now))
}

func (w *workBudget) spend(now time.Time, d time.Duration, rows int) {
	w.time.spend(now, d.Seconds())
	w.rows.spend(now, float64(rows))
}

func (w *workBudget) full(now time.Time) bool {
	w.time.refill(now)
	w.rows.refill(now)
	return w.time.tokens >= w.time.rate*workBurst && w.rows.tokens >= w.rows.rate*workBurst
}

// connWork is a connection's budget, safe for its handlers to share.
type connWork struct {
	mu sync.Mutex
	b  workBudget
}

// maxWorkWait is the longest a query waits for its budgets; a client in
// more debt than that is refused with rate-limited and told how long to
// wait.
const maxWorkWait = 2 * time.Second

// admitWork waits, within ctx and maxWorkWait, until both the
// connection's and its address's budgets allow a query. It returns "" to
// go ahead, or a NIP-01 reason to refuse.
func (c *conn) admitWork(ctx context.Context) string {
	for {
		c.work.mu.Lock()
		w := c.work.b.wait(time.Now())
		c.work.mu.Unlock()
		w = max(w, c.r.addrs.workWait(c.addr))
		if w == 0 {
			return ""
		}
		refuse := w > maxWorkWait
		// A refused client waits as long as one admitted would have,
		// so that a loop of refused queries spins no faster than it
		// may ask.
		t := time.NewTimer(min(w, maxWorkWait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "closed: subscription ended"
		}
		if refuse {
			c.r.m.rejected.WithLabelValues("query_budget").Inc()
			return fmt.Sprintf("rate-limited: this connection's queries used their share of the relay; retry in %ds", int((w-maxWorkWait).Seconds())+1)
		}
	}
}

// spendWork charges a query to the connection and its address.
func (c *conn) spendWork(d time.Duration, rows int) {
	now := time.Now()
	c.work.mu.Lock()
	c.work.b.spend(now, d, rows)
	c.work.mu.Unlock()
	c.r.addrs.spendWork(c.addr, d, rows)
}

// workMeter adds up the store work done on behalf of one request: rows
// the store handed back and time spent in store calls (time a REQ waits
// for a mesh lookup is not the store's and is not counted).
type workMeter struct {
	rows  atomic.Int64
	nanos atomic.Int64
}

type workMeterKey struct{}

// withMeter returns ctx carrying a new meter.
func withMeter(ctx context.Context) (context.Context, *workMeter) {
	m := &workMeter{}
	return context.WithValue(ctx, workMeterKey{}, m), m
}

// meteredStore is the relay's Store with every call metered into the
// workMeter its context carries, so budgets see all the work of a REQ,
// COUNT or NEG-OPEN whatever path served it.
type meteredStore struct{ Store }

// meteredRawStore is meteredStore over a store that also answers QueryRaw:
// the meter must not hide that method, or every REQ would decode each
// event into a nostr.Event and encode it again.
type meteredRawStore struct {
	meteredStore
	raw rawQuerier
}

// metered wraps st for the work budgets, keeping its raw query path.
func metered(st Store) Store {
	if rq, ok := st.(rawQuerier); ok {
		return meteredRawStore{meteredStore{st}, rq}
	}
	return meteredStore{st}
}

func (s meteredRawStore) QueryRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error {
	m, ok := ctx.Value(workMeterKey{}).(*workMeter)
	if !ok {
		return s.raw.QueryRaw(ctx, f, limit, fn)
	}
	start := time.Now()
	err := s.raw.QueryRaw(ctx, f, limit, func(r eventstore.Raw) bool {
		m.rows.Add(1)
		return fn(r)
	})
	m.nanos.Add(int64(time.Since(start)))
	return err
}

func (s meteredStore) Query(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event) bool) error {
	m, ok := ctx.Value(workMeterKey{}).(*workMeter)
	if !ok {
		return s.Store.Query(ctx, f, limit, fn)
	}
	start := time.Now()
	err := s.Store.Query(ctx, f, limit, func(ev *nostr.Event) bool {
		m.rows.Add(1)
		return fn(ev)
	})
	m.nanos.Add(int64(time.Since(start)))
	return err
}

func (s meteredStore) Count(ctx context.Context, f *nostr.Filter) (int64, bool, error) {
	start := time.Now()
	n, approx, err := s.Store.Count(ctx, f)
	if m, ok := ctx.Value(workMeterKey{}).(*workMeter); ok {
		m.nanos.Add(int64(time.Since(start)))
	}
	return n, approx, err
}

// charge spends what m measured from the connection's and its address's
// budgets.
func (c *conn) charge(m *workMeter) {
	c.spendWork(time.Duration(m.nanos.Load()), int(m.rows.Load()))
}
