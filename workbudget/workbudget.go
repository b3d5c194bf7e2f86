// Package workbudget bounds the store work one party (a client
// connection, an address, a mesh peer) may ask of a node: query time and
// rows read, each a bucket that refills at a rate and holds at most Burst
// seconds of it (spec/limits.md).
//
// Work is charged when it is known. A query's cost is known only after it
// ran, so a charge may leave a budget in debt, and the next query waits
// until the debt is paid: one broad query is never refused outright, but
// a loop of them gets the rate and no more, and slows only the party that
// sends it. Work whose size can be bounded beforehand (a NIP-77 listing
// of at most N records) is reserved up front with Reserve and settled
// with the real cost afterwards, so that several such requests started at
// once cannot all run before the first is charged.
//
// golang.org/x/time/rate cannot do this: its reservations must be known
// before the work and no larger than the burst. It is not for event or
// connection rates, where a token is known before the work; those use
// x/time/rate or clientaddr.Buckets.
package workbudget

import (
	"context"
	"math"
	"time"
)

// Burst is how many seconds of its rate a budget may save up.
const Burst = 4

// DebtSeconds is how many seconds of its rate a budget may owe, at least:
// one outsized query is paid off in a bounded time. A budget made with a
// larger Largest owes up to that instead, so the largest charge the
// caller can make is counted in full.
const DebtSeconds = 30

// Work is an amount of store work.
type Work struct {
	Time time.Duration // spent in store calls
	Rows int           // events read
}

// Budget is one party's time and rows buckets. It is not safe for
// concurrent use: its owner locks it.
type Budget struct {
	time bucket // in seconds of store time
	rows bucket // in rows read
}

// New makes a budget of millisPerSecond of store time and rowsPerSecond
// rows (0: unlimited), full. largest is the largest single charge the
// caller may make; the debt bound is raised to cover it.
func New(millisPerSecond, rowsPerSecond int, largest Work) Budget {
	now := time.Now()
	return Budget{
		time: newBucket(now, float64(millisPerSecond)/1000, largest.Time.Seconds()),
		rows: newBucket(now, float64(rowsPerSecond), float64(largest.Rows)),
	}
}

// Wait says how long the party must wait before its next request (0: it
// may go now).
func (b *Budget) Wait(now time.Time) time.Duration {
	return max(b.time.wait(now), b.rows.wait(now))
}

// Spend charges w, which may leave the budget in debt.
func (b *Budget) Spend(now time.Time, w Work) {
	b.time.spend(now, w.Time.Seconds())
	b.rows.spend(now, float64(w.Rows))
}

// Reserve charges w up front if the budget allows a request now, and
// reports what it charged: w, or as much of it as takes the budget
// ReserveDebt into debt, if that is less. That is enough that requests
// after it wait for it to be settled, and not so much that they are
// refused for work that may never be done. The caller settles with
// Settle, with what Reserve returned, once the real cost is known.
func (b *Budget) Reserve(now time.Time, w Work) (Work, bool) {
	if b.Wait(now) > 0 {
		return Work{}, false
	}
	r := Work{
		Time: time.Duration(b.time.reservable(w.Time.Seconds()) * float64(time.Second)),
		Rows: int(b.rows.reservable(float64(w.Rows))),
	}
	b.Spend(now, r)
	return r, true
}

// ReserveDebt is how far, in seconds of its rate, a reservation takes a
// budget into debt at most.
const ReserveDebt = 1

// Settle replaces a reservation of reserved by the real cost used: what
// was reserved and not used is given back.
func (b *Budget) Settle(now time.Time, reserved, used Work) {
	b.Spend(now, Work{Time: used.Time - reserved.Time, Rows: used.Rows - reserved.Rows})
}

// Full says whether both buckets are full, so a table of budgets can
// forget this one without forgiving anything.
func (b *Budget) Full(now time.Time) bool {
	return b.time.full(now) && b.rows.full(now)
}

type bucket struct {
	rate   float64 // per second; 0 = unlimited
	tokens float64
	debt   float64 // the most tokens may go below zero
	last   time.Time
}

func newBucket(now time.Time, rate, largest float64) bucket {
	return bucket{rate: rate, tokens: rate * Burst, debt: max(rate*DebtSeconds, largest), last: now}
}

func (b *bucket) refill(now time.Time) {
	if b.rate <= 0 {
		return
	}
	if now.After(b.last) {
		b.tokens = math.Min(b.rate*Burst, b.tokens+b.rate*now.Sub(b.last).Seconds())
		b.last = now
	}
}

func (b *bucket) wait(now time.Time) time.Duration {
	b.refill(now)
	if b.rate <= 0 || b.tokens > 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// spend takes n tokens (gives them back when n is negative), within the
// burst and the debt bound.
func (b *bucket) spend(now time.Time, n float64) {
	b.refill(now)
	if b.rate > 0 {
		b.tokens = math.Min(b.rate*Burst, math.Max(-b.debt, b.tokens-n))
	}
}

// reservable is how much of n a reservation takes (after a refill):
// down to ReserveDebt seconds of debt at most.
func (b *bucket) reservable(n float64) float64 {
	if b.rate <= 0 {
		return 0
	}
	return math.Max(0, math.Min(n, b.tokens+b.rate*ReserveDebt))
}

func (b *bucket) full(now time.Time) bool {
	b.refill(now)
	return b.tokens >= b.rate*Burst
}

// MaxWait is the longest a request waits for its budgets; one in more
// debt than that is refused, and told how long to wait.
const MaxWait = 2 * time.Second

// Admit asks try whether a request may go (try returns 0, having reserved
// what it needs) or how long it must wait, and waits, within ctx, until
// it may. A request that would wait more than MaxWait waits MaxWait, so
// that a loop of refused requests spins no faster than it may ask, and is
// refused: Admit returns how long it should wait before asking again. It
// returns ctx's error if ctx ends first, and 0 and nil when admitted.
func Admit(ctx context.Context, try func() time.Duration) (retry time.Duration, err error) {
	for {
		w := try()
		if w == 0 {
			return 0, nil
		}
		t := time.NewTimer(min(w, MaxWait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
		if w > MaxWait {
			return w - MaxWait, nil
		}
	}
}
