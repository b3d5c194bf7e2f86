package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/workbudget"
)

// connWork is a connection's REQ, COUNT and NEG-OPEN work budget
// (package workbudget), safe for its handlers to share.
type connWork struct {
	mu sync.Mutex
	b  workbudget.Budget
}

// largestWork is the largest single charge a request can make: a NIP-77
// listing of MaxNegRecords, or a query that runs to its timeout. Budgets
// owe it in full, so no request is under-charged.
func (c *Config) largestWork() workbudget.Work {
	return workbudget.Work{Time: c.QueryTimeout.Duration, Rows: c.MaxNegRecords + 1}
}

// admitWork waits, within ctx and workbudget.MaxWait, until both the
// connection's and its address's budgets allow a query. It returns "" to
// go ahead, or a NIP-01 reason to refuse.
func (c *conn) admitWork(ctx context.Context) string {
	_, reason := c.admitReserving(ctx, workbudget.Work{})
	return reason
}

// reservation is what admitReserving took from the connection's and the
// address's budgets.
type reservation struct{ conn, addr workbudget.Work }

// admitReserving is admitWork that also reserves w from the address's and
// the connection's budgets the moment both allow the request, so that
// work of a known bound is charged before it runs; the caller settles
// what it returns with settleWork.
func (c *conn) admitReserving(ctx context.Context, w workbudget.Work) (reservation, string) {
	var res reservation
	retry, err := workbudget.Admit(ctx, func() time.Duration {
		c.work.mu.Lock()
		wait := c.work.b.Wait(time.Now())
		c.work.mu.Unlock()
		if wait > 0 {
			return wait
		}
		// The address's check and its reservation are one step, so
		// requests from one address started at once go one at a time.
		if res.addr, wait = c.r.addrs.reserveWork(c.addr, w); wait > 0 {
			return wait
		}
		c.work.mu.Lock()
		// The connection's check above and this may race with its own
		// other handlers; a reservation that finds it in debt takes
		// nothing.
		res.conn, _ = c.work.b.Reserve(time.Now(), w)
		c.work.mu.Unlock()
		return 0
	})
	switch {
	case err != nil:
		return res, "closed: subscription ended"
	case retry > 0:
		c.r.m.rejected.WithLabelValues("query_budget").Inc()
		return res, fmt.Sprintf("rate-limited: this connection's queries used their share of the relay; retry in %ds", int(retry.Seconds())+1)
	}
	return res, ""
}

// settleWork charges used to the connection and its address in place of
// what was reserved for it.
func (c *conn) settleWork(res reservation, used workbudget.Work) {
	now := time.Now()
	c.work.mu.Lock()
	c.work.b.Settle(now, res.conn, used)
	c.work.mu.Unlock()
	c.r.addrs.settleWork(c.addr, res.addr, used)
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

// QueryRaw meters a raw query as Query does. A store that cannot hand out
// raw records is queried through Query, each event wrapped as a Raw.
func (s meteredStore) QueryRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error {
	m, _ := ctx.Value(workMeterKey{}).(*workMeter)
	count := func(r eventstore.Raw) bool {
		if m != nil {
			m.rows.Add(1)
		}
		return fn(r)
	}
	start := time.Now()
	var err error
	if rq, ok := s.Store.(rawQuerier); ok {
		err = rq.QueryRaw(ctx, f, limit, count)
	} else {
		err = s.Store.Query(ctx, f, limit, func(ev *nostr.Event) bool { return count(eventRaw{ev}) })
	}
	if m != nil {
		m.nanos.Add(int64(time.Since(start)))
	}
	return err
}

// errNoHead is QueryRawHead's answer when the store cannot say the
// feed's position of its answer: the caller queries without it.
var errNoHead = errors.New("relay: the store gives no feed position with its answers")

// QueryRawHead meters a query that also says the feed's position it read
// at, as QueryRaw does; a store that cannot say answers errNoHead having
// queried nothing.
func (s meteredStore) QueryRawHead(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) (uint64, error) {
	hq, ok := s.Store.(rawHeadQuerier)
	if !ok {
		return 0, errNoHead
	}
	m, _ := ctx.Value(workMeterKey{}).(*workMeter)
	start := time.Now()
	head, err := hq.QueryRawHead(ctx, f, limit, func(r eventstore.Raw) bool {
		if m != nil {
			m.rows.Add(1)
		}
		return fn(r)
	})
	if m != nil {
		m.nanos.Add(int64(time.Since(start)))
	}
	return head, err
}

// rawLister is the optional part of a Store that lists matches in no
// particular order, cheaply for the whole store (store.Store does).
type rawLister interface {
	ListRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error
}

// ListRaw meters an unordered listing as Query does; a store that cannot
// list is queried with QueryRaw.
func (s meteredStore) ListRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error {
	l, ok := s.Store.(rawLister)
	if !ok {
		return s.QueryRaw(ctx, f, limit, fn)
	}
	m, _ := ctx.Value(workMeterKey{}).(*workMeter)
	start := time.Now()
	err := l.ListRaw(ctx, f, limit, func(r eventstore.Raw) bool {
		if m != nil {
			m.rows.Add(1)
		}
		return fn(r)
	})
	if m != nil {
		m.nanos.Add(int64(time.Since(start)))
	}
	return err
}

// eventRaw is a decoded event seen as a Raw.
type eventRaw struct{ ev *nostr.Event }

func (r eventRaw) ID() [32]byte                 { return r.ev.ID }
func (r eventRaw) PubKey() [32]byte             { return r.ev.PubKey }
func (r eventRaw) CreatedAt() int64             { return r.ev.CreatedAt }
func (r eventRaw) Kind() int                    { return r.ev.Kind }
func (r eventRaw) AppendJSON(dst []byte) []byte { return r.ev.AppendJSON(dst) }
func (r eventRaw) Event() (*nostr.Event, error) { return r.ev, nil }

func (s meteredStore) Count(ctx context.Context, f *nostr.Filter) (int64, bool, error) {
	start := time.Now()
	n, approx, err := s.Store.Count(ctx, f)
	if m, ok := ctx.Value(workMeterKey{}).(*workMeter); ok {
		m.nanos.Add(int64(time.Since(start)))
	}
	return n, approx, err
}

// work is what m measured.
func (m *workMeter) work() workbudget.Work {
	return workbudget.Work{Time: time.Duration(m.nanos.Load()), Rows: int(m.rows.Load())}
}

// charge spends what m measured from the connection's and its address's
// budgets.
func (c *conn) charge(m *workMeter) { c.settleWork(reservation{}, m.work()) }
