package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/internal/progress"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// Directions, as metric labels.
const (
	dirToMesh    = "to_mesh"
	dirToBackend = "to_backend"
)

// cursorFlushInterval is how often changed cursors are written.
const cursorFlushInterval = time.Second

// maxErrorRetries bounds the retries of an event the backend keeps
// answering "error:" for, so one event cannot stall the queue forever.
const maxErrorRetries = 8

// liveSub is the subscription id of the backend → mesh live REQ.
const liveSub = "fleetmesh-gateway-live"

// Options wire a gateway to its node: the mesh side is the node's relay
// and store, through which events reach the mesh.
type Options struct {
	Settings Settings
	// Home is the node home; the cursors live in it.
	Home string
	// Key answers the backend's NIP-42 AUTH.
	Key      nostr.SecretKey
	Relay    *relay.Relay
	Store    Store
	Policy   *boundary.Policy
	Registry prometheus.Registerer
	Log      *slog.Logger
}

// Store is what a gateway reads of the node's event store: the Pebble
// store or PostgreSQL, whichever the node runs on.
type Store interface {
	Query(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event) bool) error
}

// Gateway carries events between the node and one backend relay.
type Gateway struct {
	s      Settings
	key    nostr.SecretKey
	relay  *relay.Relay
	store  Store
	policy *boundary.Policy
	log    *slog.Logger
	m      *metrics
	state  stateFile
	saved  Cursors

	in    *watermark
	out   *watermark
	queue *queue
	// progress follows each direction's catch-up (catchup.go), by
	// direction.
	progress map[string]*progress.Tracker

	health health
}

// New loads the cursors and registers the gateway's hook on the relay; it
// must run before the node serves. Run then drives the backend side.
func New(o Options) (*Gateway, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	st := stateFile{path: filepath.Join(o.Home, StateFile)}
	cur, err := st.load()
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		s: o.Settings, key: o.Key, relay: o.Relay, store: o.Store, policy: o.Policy,
		log: o.Log, m: m, state: st, saved: cur,
		in:    newWatermark(cur.In),
		out:   newWatermark(cur.Out),
		queue: newQueue(o.Settings.QueueSize),
		// catchUp logs each catch-up's end itself, with its method.
		progress: map[string]*progress.Tracker{
			dirToMesh:    progress.New("gateway", o.Log.With("direction", dirToMesh), false),
			dirToBackend: progress.New("gateway", o.Log.With("direction", dirToBackend), false),
		},
	}
	if err := registerProgress(o.Registry, g.progress); err != nil {
		return nil, err
	}
	o.Relay.OnStored = append(o.Relay.OnStored, g.onStored)
	return g, nil
}

// Progress returns how far each direction's catch-up is, or how its last
// one went, by direction (to_mesh, to_backend).
func (g *Gateway) Progress() map[string]progress.Progress {
	out := make(map[string]progress.Progress, len(g.progress))
	for dir, t := range g.progress {
		out[dir] = t.Get()
	}
	return out
}

// onStored queues a locally stored event for the backend. Events that came
// from the backend never go back to it.
func (g *Gateway) onStored(ev *nostr.Event, from relay.Origin) {
	if from == relay.FromBackend || !nostr.MatchesAny(g.s.ToBackend, ev) {
		return
	}
	if g.policy.Allow(ev, boundary.ToBackend) != nil {
		g.m.refused.WithLabelValues(dirToBackend).Inc()
		return
	}
	g.out.add(ev.ID, ev.CreatedAt)
	queued, full := g.queue.push(ev)
	switch {
	case full:
		g.out.drop(ev.ID, ev.CreatedAt)
		g.m.dropped.Inc()
	case !queued:
		g.out.done(ev.ID) // already queued: one delivery settles it
	}
	g.m.backlog.Set(float64(g.queue.len()))
}

// Run connects to the backend and carries events until ctx ends,
// reconnecting with capped exponential backoff and jitter whenever the
// backend is unreachable. It writes the cursors a last time on return.
func (g *Gateway) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	flushCtx, stopFlush := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.flushLoop(flushCtx)
	}()
	defer func() {
		stopFlush()
		wg.Wait()
		if err := g.flush(); err != nil {
			g.log.Error("gateway: save cursors", "err", err)
		}
	}()

	failures := 0
	for {
		healthy, err := g.runSession(ctx)
		g.m.connected.Set(0)
		if ctx.Err() != nil {
			return nil
		}
		if healthy {
			failures = 0
		}
		wait := backoff(g.s.RetryMin, g.s.RetryMax, failures)
		failures++
		if r := (*refusal)(nil); errors.As(err, &r) {
			// Logged once as an ERROR by refused; asking again is routine.
			g.log.Debug("gateway: backend refuses reads; asking again", "backend", g.s.Backend, "in", wait.Round(time.Millisecond))
		} else {
			g.log.Warn("gateway: backend unavailable; retrying", "backend", g.s.Backend, "err", err, "in", wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// backoff is capped exponential backoff with equal jitter: half the step
// fixed, half random, so gateways that lost one backend do not return in
// lockstep.
func backoff(lo, hi time.Duration, failures int) time.Duration {
	d := lo
	for i := 0; i < failures && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

func (g *Gateway) flushLoop(ctx context.Context) {
	periodic.Run(ctx, cursorFlushInterval, cursorFlushInterval, nil, func() {
		if err := g.flush(); err != nil {
			g.log.Error("gateway: save cursors", "err", err)
		}
	})
}

// flush persists the cursors if they moved. Only the flush loop and Run's
// last call write, never at once.
func (g *Gateway) flush() error {
	c := Cursors{In: g.in.value(), Out: g.out.value()}
	if c == g.saved {
		return nil
	}
	if err := g.state.save(c); err != nil {
		return err
	}
	g.saved = c
	return nil
}

// runSession runs one connection: the live backend subscription, the
// catch-up of both directions, then the live queue to the backend. healthy
// reports that it got as far as a completed catch-up.
func (g *Gateway) runSession(ctx context.Context) (bool, error) {
	ws, err := dialBackend(ctx, g.s.Backend, g.s.PublishTimeout)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	s := newSession(g, ws)
	live := make(chan *nostr.Event, subBuffer)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		ws.Close()
		wg.Wait()
		// Events the reader received but nobody stored are not durable:
		// the next catch-up must reach back to them.
		for {
			select {
			case ev := <-live:
				g.in.drop(ev.ID, ev.CreatedAt)
			default:
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.read(sctx, live)
	}()
	g.m.connected.Set(1)
	g.log.Info("gateway: connected to the backend", "backend", g.s.Backend)

	// The live REQ is settled (EOSE, or refused) before any catch-up
	// request, so a NOTICE is never taken for the wrong one's.
	req, liveSubCh, unsub, err := g.openLive(sctx, s, live)
	var refused *refusal
	if errors.As(err, &refused) {
		// Nothing can be read from this backend: carry the other
		// direction for one backoff step, then ask again on a new
		// connection.
		var cancelOut context.CancelFunc
		sctx, cancelOut = context.WithTimeout(sctx, g.s.RetryMax)
		defer cancelOut()
	} else if err != nil {
		return false, err
	}

	liveErr := make(chan error, 1)
	if refused == nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer unsub()
			liveErr <- g.liveIn(sctx, s, live, req, liveSubCh)
		}()
	}

	var healthy atomic.Bool
	work := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		work <- g.sync(sctx, s, refused == nil, &healthy)
	}()
	select {
	case err = <-liveErr:
	case err = <-work:
	case <-s.done:
		err = fmt.Errorf("%w: %v", errBroken, s.readErr)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if refused != nil && ctx.Err() == nil {
		return false, refused
	}
	return healthy.Load(), err
}

// openLive opens the live backend → mesh subscription (limit 0: only new
// events; the catch-up covers stored ones) and waits for its EOSE, storing
// what comes before it (a backend that ignores limit 0 sends stored events
// too). A NOTICE or CLOSED instead degrades the session to plain filters
// and asks again; refused in that shape too, it returns a *refusal. It
// returns the REQ sent and the subscription's channel for liveIn.
func (g *Gateway) openLive(ctx context.Context, s *session, live <-chan *nostr.Event) (nostr.ClientMessage, <-chan *nostr.RelayMessage, func(), error) {
	closed, unsub := s.subscribe(liveSub)
	notices, unwatch := s.watchNotices(liveSub)
	defer unwatch()
	shape := func() nostr.ClientMessage {
		req := nostr.ClientMessage{Type: nostr.MsgReq, SubID: liveSub, Filters: make([]nostr.Filter, 0, len(g.s.ToMesh))}
		for _, f := range g.s.ToMesh {
			f.Limit, f.HasLimit = 0, true
			if s.plain {
				f = plainShape(f)
			}
			req.Filters = append(req.Filters, f)
		}
		return req
	}
	req := shape()
	if err := s.send(req); err != nil {
		unsub()
		return nostr.ClientMessage{}, nil, nil, err
	}
	fail := func(err error) (nostr.ClientMessage, <-chan *nostr.RelayMessage, func(), error) {
		unsub()
		return nostr.ClientMessage{}, nil, nil, err
	}
	authTried := false
	t := time.NewTimer(g.s.PublishTimeout)
	defer t.Stop()
	refuse := func(text string) error {
		if err := g.refusedREQ(s, "live", text); !errors.Is(err, errShape) {
			return err
		}
		req = shape()
		return s.send(req)
	}
	for {
		select {
		case ev := <-live:
			if err := g.ingest(ctx, ev); err != nil {
				g.in.drop(ev.ID, ev.CreatedAt)
				return fail(err)
			}
			g.in.done(ev.ID)
			t.Reset(g.s.PublishTimeout)
		case m := <-closed:
			switch {
			case m.Type == nostr.MsgEOSE:
				return req, closed, unsub, nil
			case m.Type != nostr.MsgClosed:
			case prefix(m.Text) == "auth-required" && !authTried:
				authTried = true
				if err := s.authenticate(ctx); err != nil {
					return fail(err)
				}
				if err := s.send(req); err != nil {
					return fail(err)
				}
			default:
				if err := refuse(m.Text); err != nil {
					return fail(err)
				}
			}
		case m := <-notices:
			if err := refuse(m.Text); err != nil {
				return fail(err)
			}
		case <-t.C:
			return fail(fmt.Errorf("%w: no EOSE for the live REQ within %s", errBroken, g.s.PublishTimeout))
		case <-s.done:
			return fail(fmt.Errorf("%w: %v", errBroken, s.readErr))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}

// liveIn stores what the live subscription delivers after its EOSE.
func (g *Gateway) liveIn(ctx context.Context, s *session, live <-chan *nostr.Event, req nostr.ClientMessage, closed <-chan *nostr.RelayMessage) error {
	for {
		select {
		case ev := <-live:
			if err := g.ingest(ctx, ev); err != nil {
				g.in.drop(ev.ID, ev.CreatedAt)
				return err
			}
			g.in.done(ev.ID)
		case m := <-closed:
			if m.Type != nostr.MsgClosed {
				continue
			}
			if prefix(m.Text) != "auth-required" {
				return fmt.Errorf("gateway: backend closed the live subscription: %s", m.Text)
			}
			if err := s.authenticate(ctx); err != nil {
				return err
			}
			if err := s.send(req); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ingest stores one backend event on the mesh side if the filters and the
// policy let it cross. A store failure is returned (the event is not
// durable, so no cursor may pass it); a bad event is logged and skipped.
func (g *Gateway) ingest(ctx context.Context, ev *nostr.Event) error {
	if !nostr.MatchesAny(g.s.ToMesh, ev) {
		return nil
	}
	if g.policy.Allow(ev, boundary.ToMesh) != nil {
		g.m.refused.WithLabelValues(dirToMesh).Inc()
		return nil
	}
	res, err := g.relay.AddEvent(ctx, ev, relay.FromBackend)
	if err != nil {
		if errors.Is(err, nostr.ErrBadID) || errors.Is(err, nostr.ErrBadSignature) || errors.Is(err, nostr.ErrBadPubKey) {
			g.log.Warn("gateway: backend sent an invalid event", "id", ev.IDHex(), "err", err)
			return nil
		}
		// The node's own policy refused it (a ban, a class it never
		// stores): skipped like a bad event, or the cursor would stall.
		if refused := new(relay.RefusedError); errors.As(err, &refused) {
			g.log.Info("gateway: the node's policy refused a backend event", "id", ev.IDHex(), "reason", refused.Reason)
			return nil
		}
		return fmt.Errorf("gateway: store %s from the backend: %w", ev.IDHex(), err)
	}
	if res == eventstore.Stored {
		g.m.carried.WithLabelValues(dirToMesh).Inc()
	}
	return nil
}

// sync catches up both directions, then delivers the live queue,
// catching up again whenever events were dropped from a full queue.
func (g *Gateway) sync(ctx context.Context, s *session, readable bool, healthy *atomic.Bool) error {
	var in []nostr.Filter
	if readable {
		var err error
		if in, err = g.catchUpIn(ctx, s); err != nil {
			return err
		}
		g.caughtUp()
	}
	out, err := g.catchUpOut(ctx, s)
	if err != nil {
		return err
	}
	healthy.Store(true)
	// Where NIP-77 could not cover all time, the full walk does, a page
	// at a time while the live queue is empty (walk.go).
	walk := newFullWalk(s, in, out)
	for {
		if g.out.hasDropped() {
			if _, err := g.catchUpOut(ctx, s); err != nil {
				return err
			}
		}
		if walk != nil && g.queue.len() == 0 {
			over, err := g.walkStep(ctx, s, walk)
			if err != nil {
				return err
			}
			if over {
				g.walked(walk)
				walk = nil
			}
			continue
		}
		ev, err := g.queue.peek(ctx)
		if err != nil {
			return err
		}
		if err := g.publish(ctx, s, ev); err != nil {
			return err
		}
		g.queue.remove(ev)
		g.out.done(ev.ID)
		g.m.backlog.Set(float64(g.queue.len()))
	}
}

// publish sends one event to the backend until the backend settles it:
// OK true (or duplicate) delivers it; blocked/invalid and other final
// refusals are logged and counted; auth-required authenticates and
// retries; rate-limited and error back off and retry. It fails only when
// the connection does, leaving the event pending.
func (g *Gateway) publish(ctx context.Context, s *session, ev *nostr.Event) error {
	authTries, retries := 0, 0
	for {
		m, err := s.sendEvent(ctx, nostr.MsgEvent, ev)
		if err != nil {
			return err
		}
		p := prefix(m.Text)
		switch {
		case m.OK || p == "duplicate":
			g.m.carried.WithLabelValues(dirToBackend).Inc()
			return nil
		case p == "auth-required" && authTries < 2:
			authTries++
			if err := s.authenticate(ctx); err != nil {
				return err
			}
			continue
		// A rate limit is waited out however long it lasts (spec/gateway.md);
		// only "error:" is bounded, so one event cannot stall the queue.
		case p == "rate-limited" || (p == "error" && retries < maxErrorRetries):
			retries++
			wait := backoff(g.s.RetryMin, g.s.RetryMax, retries)
			g.log.Info("gateway: backend asked to retry", "id", ev.IDHex(), "message", m.Text, "in", wait.Round(time.Millisecond))
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		if p == "" {
			p = "none"
		}
		g.m.rejected.WithLabelValues(p).Inc()
		g.log.Warn("gateway: backend refused an event", "id", ev.IDHex(), "kind", ev.Kind, "message", m.Text)
		return nil
	}
}
