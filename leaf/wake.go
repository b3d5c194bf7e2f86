package leaf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/nostr"
)

// Timing of a wake.
const (
	// exchangeTimeout bounds one request and its answer: a path silent
	// that long is taken as dead (a socket that went stale during a
	// suspend sends no FIN) and the request is retried on a new
	// connection.
	exchangeTimeout = 8 * time.Second
	// dialTimeout bounds one TCP and TLS or WebSocket handshake.
	dialTimeout = 5 * time.Second
	// returnMargin is kept from the budget for writing the summary.
	returnMargin = 500 * time.Millisecond
	// retryMin and retryMax bound the pause between attempts.
	retryMin, retryMax = 100 * time.Millisecond, 2 * time.Second
	// unreachableAfter is how long a home's dials must fail before the
	// wake leaves it (a restart takes less; a dead home is left well
	// before the budget ends).
	unreachableAfter = dialTimeout
)

// wake is one Sync: its connections, counters and summary.
type wake struct {
	l       *Leaf
	ctx     context.Context
	start   time.Time
	http    *http.Client
	tr      *http.Transport
	dialer  *net.Dialer
	st      state
	rank    rankFunc
	counter *counters
	// proofs says, per home, that the leaf sends a DPoP proof on its
	// relay connections: the home mediated for it when the wake began.
	proofs []bool
	// serve is the app's SetServe at the start of the wake; serveLeft
	// the bytes it may still serve.
	serve     bool
	serveLeft atomic.Int64
	// relays are the Nostr side's connections (nil until it runs).
	relays *relayPool
	// dials tracks failed dials per address (host:port), homeAddrs
	// each home's.
	dialMu    sync.Mutex
	dials     map[string]*dialStreak
	homeAddrs []string
	// bg holds the goroutines that may outlive the task that started
	// them (a losing parallel dial); Sync waits for them.
	bg sync.WaitGroup

	mu      sync.Mutex
	sum     Summary
	errs    []error
	drained bool // every mediator queue was emptied
	caught  bool // every subscription reconciled
}

// counters are a wake's traffic counts.
type counters struct {
	sent, recv, conns, rtts, stalls atomic.Int64
	firstPickup                     atomic.Int64
}

// countingConn counts a connection's bytes.
type countingConn struct {
	net.Conn
	c *counters
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.c.recv.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.c.sent.Add(int64(n))
	return n, err
}

// dialStreak is an address's dials failing in a row.
type dialStreak struct {
	fails int
	since time.Time
}

// dial opens a new counted TCP connection: a wake never reuses a socket
// from an earlier wake (there are none: each wake closes its own). It
// keeps each address's streak of failed dials for unreachable.
func (w *wake) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := w.dialer.DialContext(ctx, network, addr)
	w.dialMu.Lock()
	switch {
	case err == nil:
		delete(w.dials, addr)
	case ctx.Err() == nil:
		s := w.dials[addr]
		if s == nil {
			s = &dialStreak{since: time.Now()}
			w.dials[addr] = s
		}
		s.fails++
	}
	w.dialMu.Unlock()
	if err != nil {
		return nil, err
	}
	w.counter.conns.Add(1)
	return &countingConn{Conn: c, c: w.counter}, nil
}

// unreachable reports whether home i is to be left for the rest of the
// wake: at least two dials to it failed in a row, over unreachableAfter
// or more. A home that refuses connections (down) or whose dials time out
// (a dead path) is then no longer retried, so a leaf with two homes, one
// of them down, ends its wake when the other is done rather than at its
// budget. A path that connects but goes silent is not this: its
// exchanges stall and are retried.
func (w *wake) unreachable(i int) bool {
	w.dialMu.Lock()
	defer w.dialMu.Unlock()
	s := w.dials[w.homeAddrs[i]]
	return s != nil && s.fails >= 2 && time.Since(s.since) >= unreachableAfter
}

// retryHome is retry for work with home i, given up once the home is
// unreachable.
func (w *wake) retryHome(i int, fn func() error) error {
	return w.retry(func() error {
		if w.unreachable(i) {
			return permanent(fmt.Errorf("%w: every dial failed for %s", errUnreachable, unreachableAfter))
		}
		return fn()
	})
}

// hostPort is the address an http(s) or ws(s) URL dials.
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" || u.Scheme == "wss" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Sync runs one wake within the budget: dial every home node in parallel
// on fresh connections, pick up queued DIDComm messages (stored on disk
// before they are acknowledged), catch up the subscriptions (NIP-77,
// else since windows), flush the outbox, exchange the receipts of closed
// accounting windows with each home while time is left, and return the
// summary. A
// cancelled c, or the budget, ends it early (within 2 s); what is left is
// resumed by the next Sync. ctx may be nil.
func (l *Leaf) Sync(ctx *Context) (sum *Summary, err error) {
	defer protect(&err)
	if ctx == nil {
		ctx = NewContext()
	}
	l.wakeMu.Lock()
	defer l.wakeMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errClosed
	}
	idle := make(chan struct{})
	l.wake, l.idle = ctx, idle
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.wake = nil
		l.mu.Unlock()
		close(idle)
	}()

	start := time.Now()
	budget := time.Duration(l.cfg.BudgetMs) * time.Millisecond
	wctx, cancel := context.WithDeadline(ctx.ctx, start.Add(budget-min(returnMargin, budget/10)))
	defer cancel()
	w := &wake{l: l, ctx: wctx, start: start, rank: l.rankFunc(), counter: &counters{}, dials: map[string]*dialStreak{}}
	w.counter.firstPickup.Store(-1)
	l.mu.Lock()
	w.serve = l.serve
	l.mu.Unlock()
	w.serveLeft.Store(l.cfg.ServeBytes)
	w.dialer = &net.Dialer{Timeout: dialTimeout, KeepAlive: -1}
	w.tr = &http.Transport{
		DialContext:           w.dial,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: exchangeTimeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       budget,
		ForceAttemptHTTP2:     true,
	}
	w.http = &http.Client{Transport: w.tr}
	defer w.tr.CloseIdleConnections()

	w.st, err = l.db.loadState()
	if err != nil {
		return nil, err
	}
	for _, h := range w.st.Homes {
		w.proofs = append(w.proofs, h.Mediated)
		w.homeAddrs = append(w.homeAddrs, hostPort(h.Endpoint))
	}
	w.run()
	w.receipts()
	w.bg.Wait()
	w.tr.CloseIdleConnections()
	return w.summary(ctx.ctx.Err() != nil), nil
}

// run does the wake's work: each home's DIDComm part and one catch-up,
// in parallel.
func (w *wake) run() {
	w.l.progress.report("dial", 0, int64(len(w.st.Homes)))
	if len(w.st.Homes) == 0 {
		w.fail(errors.New("leaf: no home node: Pair with one first"))
		return
	}
	var wg sync.WaitGroup
	drained := make([]bool, len(w.st.Homes))
	for i := range w.st.Homes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			drained[i] = w.homeDIDComm(i)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.nostrPart()
	}()
	wg.Wait()
	w.mu.Lock()
	w.drained = !slices.Contains(drained, false)
	w.mu.Unlock()
}

// homeDIDComm sets up mediation with home i if needed, registers the push
// endpoint, picks up its queue and sends the outbox messages it takes.
// It reports whether the queue was drained.
func (w *wake) homeDIDComm(i int) bool {
	h := &w.st.Homes[i]
	c := &mediation.Client{Packer: w.l.packer, Unpacker: w.l.unpacker, Mediator: h.DID, Exchange: w.exchange(h.Endpoint)}
	drained := false
	err := w.retryHome(i, func() error {
		if !h.Mediated {
			if err := w.mediate(c, h); err != nil {
				return err
			}
		}
		if h.Push != w.st.Push {
			if err := c.RegisterPush(w.ctx, w.st.Push); err != nil {
				return err
			}
			if err := w.saveHome(h.DID, func(s *homeState) { s.Push = w.st.Push }); err != nil {
				return err
			}
			h.Push = w.st.Push
		}
		if err := w.pickup(c); err != nil {
			return err
		}
		drained = true
		return w.flushMessages(h)
	})
	if err != nil {
		w.fail(fmt.Errorf("leaf: home %s: %w", h.DID, err))
	}
	return drained && err == nil
}

// mediate asks home for mediation and registers the leaf's DID.
func (w *wake) mediate(c *mediation.Client, h *homeState) error {
	if _, err := c.RequestMediation(w.ctx); err != nil {
		return permanentIf(errors.Is(err, mediation.ErrDenied), err)
	}
	res, err := c.UpdateRecipients(w.ctx, mediation.Update{RecipientDID: w.l.DID(), Action: "add"})
	if err != nil {
		return err
	}
	if len(res) != 1 || (res[0].Result != "success" && res[0].Result != "no_change") {
		return permanent(fmt.Errorf("mediator did not register %s: %+v", w.l.DID(), res))
	}
	h.Mediated = true
	return w.saveHome(h.DID, func(s *homeState) { s.Mediated = true })
}

func (w *wake) saveHome(did string, fn func(*homeState)) error {
	return w.l.db.updateState(func(s *state) error {
		for i := range s.Homes {
			if s.Homes[i].DID == did {
				fn(&s.Homes[i])
			}
		}
		return nil
	})
}

// exchange posts one DIDComm message to endpoint on the wake's
// connections, within exchangeTimeout.
func (w *wake) exchange(endpoint string) mediation.Exchange {
	return func(ctx context.Context, packed []byte) ([]byte, error) {
		ectx, cancel := context.WithTimeout(ctx, exchangeTimeout)
		defer cancel()
		w.counter.rtts.Add(1)
		out, err := transport.PostHTTP(ectx, w.http, endpoint, packed)
		if errors.Is(err, transport.ErrStatus) && len(out) > 0 {
			return out, nil // a problem report: the client reads its code
		}
		if err != nil && ectx.Err() != nil && ctx.Err() == nil {
			w.counter.stalls.Add(1)
			return nil, fmt.Errorf("%w: no answer within %s", err, exchangeTimeout)
		}
		return out, err
	}
}

// permanentError is not retried within the wake.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

func permanent(err error) error { return permanentError{err} }

func permanentIf(cond bool, err error) error {
	if cond {
		return permanent(err)
	}
	return err
}

// retry runs fn until it succeeds, fails permanently or the wake ends,
// pausing between attempts.
func (w *wake) retry(fn func() error) error {
	pause := retryMin
	for {
		err := fn()
		if err == nil {
			return nil
		}
		var p permanentError
		if errors.As(err, &p) || w.ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return err
		}
		pause = min(2*pause, retryMax)
	}
}

func (w *wake) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

func (w *wake) add(f func(s *Summary)) {
	w.mu.Lock()
	f(&w.sum)
	w.mu.Unlock()
}

func (w *wake) summary(cancelled bool) *Summary {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sum
	s.DurationMs = time.Since(w.start).Milliseconds()
	s.BytesSent, s.BytesReceived = w.counter.sent.Load(), w.counter.recv.Load()
	s.Connections, s.RoundTrips, s.Stalls = w.counter.conns.Load(), w.counter.rtts.Load(), w.counter.stalls.Load()
	s.FirstPickupMs = w.counter.firstPickup.Load()
	s.Cancelled = cancelled || w.ctx.Err() != nil
	s.CaughtUp = w.drained && w.caught && len(w.errs) == 0
	if len(w.errs) > 0 {
		s.Error = w.errs[0].Error()
	}
	if es, err := w.l.db.outbox(""); err == nil {
		s.OutboxLeft = int64(len(es))
	}
	w.l.progress.report("done", 1, 1)
	return &s
}

// sortNewestFirst orders events by created_at descending, then id.
func sortNewestFirst(evs []*nostr.Event) {
	slices.SortFunc(evs, func(a, b *nostr.Event) int {
		if a.CreatedAt != b.CreatedAt {
			if a.CreatedAt > b.CreatedAt {
				return -1
			}
			return 1
		}
		for i := range a.ID {
			if a.ID[i] != b.ID[i] {
				return int(a.ID[i]) - int(b.ID[i])
			}
		}
		return 0
	})
}
