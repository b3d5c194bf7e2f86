package gateway

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/internal/progress"
	"fleetmesh.org/fleetmesh/negentropy"
	"fleetmesh.org/fleetmesh/nostr"
)

// Bounds of a catch-up.
const (
	// negFrameLimit keeps our NEG-MSG frames, hex-encoded, under the
	// 131,072-byte messages deployed relays accept (as the relay does).
	negFrameLimit = 60000
	// fetchChunk is how many ids one REQ asks for.
	fetchChunk = 100
)

// errNoNegentropy means the backend does not answer NIP-77; the catch-up
// falls back to since windows.
var errNoNegentropy = errors.New("backend does not support NIP-77")

// window returns the catch-up filters: each configured filter from the
// cursor minus the overlap (all time while the cursor is 0).
func (g *Gateway) window(filters []nostr.Filter, cursor int64) []nostr.Filter {
	out := make([]nostr.Filter, len(filters))
	for i, f := range filters {
		if cursor > 0 {
			f.Since = max(f.Since, cursor-int64(g.s.Overlap/time.Second))
		}
		f.Limit, f.HasLimit = 0, false
		out[i] = f
	}
	return out
}

// catchUpIn stores what the backend has and the mesh side lacks, for the
// to_mesh filters since the in cursor. It returns what a full walk must
// still cover (walk.go).
func (g *Gateway) catchUpIn(ctx context.Context, s *session) ([]nostr.Filter, error) {
	return g.catchUp(ctx, s, dirToMesh, g.s.ToMesh, g.in,
		func(f nostr.Filter, i int) error {
			_, need, err := g.reconcile(ctx, s, fmt.Sprintf("in-%d", i), &f)
			if err != nil {
				return err
			}
			g.progress[dirToMesh].Found(len(need))
			return g.fetch(ctx, s, need)
		},
		func(f nostr.Filter) error { return g.pageIn(ctx, s, f) })
}

// catchUpOut publishes what the mesh side has and the backend lacks, for
// the to_backend filters since the out cursor. It returns what a full walk
// must still cover (walk.go).
func (g *Gateway) catchUpOut(ctx context.Context, s *session) ([]nostr.Filter, error) {
	return g.catchUp(ctx, s, dirToBackend, g.s.ToBackend, g.out,
		func(f nostr.Filter, i int) error {
			have, _, err := g.reconcile(ctx, s, fmt.Sprintf("out-%d", i), &f)
			if err != nil {
				return err
			}
			g.progress[dirToBackend].Found(len(have))
			return g.publishLocal(ctx, s, have)
		},
		func(f nostr.Filter) error { return g.pageOut(ctx, s, f) })
}

// catchUp runs one direction's catch-up over each filter: NIP-77 over the
// whole filter first, and where the backend cannot (or the filter holds
// more than max_sync_records) since windows from the cursor; the cursor's
// base moves to the start time once all succeeded. It returns, for each
// filter caught up by a since window, the part before the window, which
// only a full walk covers (walk.go).
//
// Its progress (g.progress[dir]) is one catch-up over every filter: NIP-77
// counts the ids it found to move, a since walk guesses from the time it
// has covered (walk), and a failed catch-up gives up what it had left.
//
// NIP-77 is not windowed by the cursor because a created_at cursor cannot
// be lossless: an event arrives with the created_at its author gave it,
// so one arriving (on either side) with a created_at older than cursor −
// overlap just before a crash, or while the connection was down, lies
// outside every window after it. Reconciling the whole filter finds it
// whatever its created_at; its traffic grows with the differences, not
// with the set, and its cost on each side with the events in the filter,
// which max_sync_records bounds (spec/gateway.md, "Cursors and catch-up").
func (g *Gateway) catchUp(ctx context.Context, s *session, dir string, filters []nostr.Filter, w *watermark,
	viaNegentropy func(f nostr.Filter, i int) error, viaSince func(f nostr.Filter) error) (_ []nostr.Filter, err error) {
	prog := g.progress[dir]
	release := prog.Hold()
	defer func() {
		if err != nil {
			prog.GiveUp()
		}
		release()
	}()
	started := time.Now().Unix()
	method := "negentropy"
	windows := g.window(filters, w.start())
	var before []nostr.Filter
	for i, f := range g.window(filters, 0) {
		err := viaNegentropy(f, i)
		if fallback(err) {
			method = "since"
			err = viaSince(windows[i])
			if since := windows[i].Since; since > f.Since && (!f.HasUntil || since < f.Until) {
				f.Until, f.HasUntil = since, true
			}
			before = append(before, f)
		}
		if err != nil {
			return nil, err
		}
		prog.Estimate(0) // the filter is done: what its walk guessed was left is not
	}
	w.complete(started)
	g.m.catchups.WithLabelValues(dir, method).Inc()
	release()
	st := prog.Get()
	g.log.Info("gateway: caught up", "direction", dir, "method", method,
		"moved", st.Moved, "in", st.Elapsed.Round(time.Millisecond), "per_second", int(st.Rate))
	return before, nil
}

// fallback reports whether a NIP-77 catch-up failed in a way a since-window
// walk can still cover.
func fallback(err error) bool {
	return errors.Is(err, errNoNegentropy) || errors.Is(err, negentropy.ErrTooManyRecords) || errors.Is(err, negentropy.ErrTooManyDifferences)
}

// reconcile runs NIP-77 over one filter with the local store as the
// initiator's set and returns the ids only this side has and the ids only
// the backend has. They are acted on after the reconciliation ends, so a
// long fetch never lets the backend's sync session time out; both lists
// together are bounded by max_sync_records.
func (g *Gateway) reconcile(ctx context.Context, s *session, id string, f *nostr.Filter) (have, need []negentropy.ID, err error) {
	if s.noNeg {
		return nil, nil, errNoNegentropy
	}
	items := make([]negentropy.Item, 0, 64)
	var tooMany bool
	err = g.store.Query(ctx, f, g.s.MaxSyncRecords+1, func(ev *nostr.Event) bool {
		if len(items) == g.s.MaxSyncRecords {
			tooMany = true
			return false
		}
		items = append(items, negentropy.Item{Timestamp: uint64(max(ev.CreatedAt, 0)), ID: ev.ID})
		return true
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: load local events for sync: %w", err)
	}
	if tooMany {
		return nil, nil, fmt.Errorf("gateway: %w: more than max_sync_records (%d) local events in the window", negentropy.ErrTooManyRecords, g.s.MaxSyncRecords)
	}
	vec, err := negentropy.NewVector(items)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	in, err := negentropy.NewInitiator(vec, negentropy.Config{FrameSizeLimit: negFrameLimit, MaxRecords: g.s.MaxSyncRecords, MaxDifferences: g.s.MaxSyncRecords})
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	first, err := in.Initiate()
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	msgs, unsub := s.subscribe(id)
	defer unsub()
	notices, unwatch := s.watchNotices(id)
	defer unwatch()
	open := nostr.ClientMessage{Type: nostr.MsgNegOpen, SubID: id, Filters: []nostr.Filter{*f}, NegMsg: hex.EncodeToString(first)}
	if err := s.send(open); err != nil {
		return nil, nil, err
	}
	// NEG-CLOSE only a session the backend opened: one that answered
	// NEG-OPEN with a NOTICE may answer NEG-CLOSE with another, which the
	// next REQ would take for its own refusal.
	opened := false
	defer func() {
		if opened {
			s.send(nostr.ClientMessage{Type: nostr.MsgNegClose, SubID: id})
		}
	}()
	authTried := false
	for {
		m, err := g.await(ctx, s, msgs, notices, errNoNegentropy)
		if errors.Is(err, errNoNegentropy) {
			s.noNeg = true // silent: do not wait for it again on this connection
		}
		if err != nil {
			return nil, nil, err
		}
		switch m.Type {
		case nostr.MsgNotice:
			s.noNeg = true
			return nil, nil, fmt.Errorf("%w (it said %q)", errNoNegentropy, m.Text)
		case nostr.MsgNegErr, nostr.MsgClosed:
			if prefix(m.Text) == "auth-required" && !authTried {
				authTried = true
				if err := s.authenticate(ctx); err != nil {
					return nil, nil, err
				}
				if err := s.send(open); err != nil {
					return nil, nil, err
				}
				continue
			}
			return nil, nil, fmt.Errorf("%w (NEG-ERR %q)", errNoNegentropy, m.Text)
		case nostr.MsgNegMsg:
			opened = true
		default:
			continue
		}
		msg, err := hex.DecodeString(m.NegMsg)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: NEG-MSG is not hex", errBroken)
		}
		step, err := in.Reconcile(msg)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway: negentropy with the backend: %w", err)
		}
		have = append(have, step.Have...)
		need = append(need, step.Need...)
		if step.Done() {
			return have, need, nil
		}
		if err := s.send(nostr.ClientMessage{Type: nostr.MsgNegMsg, SubID: id, NegMsg: hex.EncodeToString(step.Next)}); err != nil {
			return nil, nil, err
		}
	}
}

// await waits for the next message of a subscription or a notice. A
// backend that says nothing within the publish timeout gives silent:
// errNoNegentropy for a NEG-OPEN (relays without NIP-77 may stay silent),
// errBroken for a REQ.
func (g *Gateway) await(ctx context.Context, s *session, msgs <-chan *nostr.RelayMessage, notices <-chan *nostr.RelayMessage, silent error) (*nostr.RelayMessage, error) {
	t := time.NewTimer(g.s.PublishTimeout)
	defer t.Stop()
	select {
	case m := <-msgs:
		return m, nil
	case m := <-notices:
		return m, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: no answer within %s", silent, g.s.PublishTimeout)
	case <-s.done:
		return nil, fmt.Errorf("%w: %v", errBroken, s.readErr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetch asks the backend for events by id and stores them.
func (g *Gateway) fetch(ctx context.Context, s *session, ids []negentropy.ID) error {
	for start := 0; start < len(ids); start += fetchChunk {
		part := ids[start:min(start+fetchChunk, len(ids))]
		f := nostr.Filter{IDs: make([][32]byte, len(part)), Limit: len(part), HasLimit: true}
		for i, id := range part {
			f.IDs[i] = id
		}
		_, err := g.request(ctx, s, "fetch", "fetch-"+strconv.Itoa(start), f)
		if errors.Is(err, errShape) {
			_, err = g.request(ctx, s, "fetch", "fetch-"+strconv.Itoa(start), f)
		}
		if err != nil {
			return err
		}
		// An id the backend no longer serves is resolved too: the
		// catch-up is through with it.
		g.progress[dirToMesh].Resolved(len(part))
	}
	return nil
}

// request runs one REQ to EOSE, storing each event that may cross, and
// returns how many events came and the oldest created_at among them. In a
// session that degraded, the REQ goes in the plain shape. A NOTICE or a
// CLOSED before the first event or EOSE is the backend refusing it: errShape
// in the full shape (the caller asks again in the plain one), a *refusal in
// the plain one. Only one REQ or NEG-OPEN is open at a time on the
// catch-up side, and the live REQ is settled before, so a NOTICE is this
// REQ's.
func (g *Gateway) request(ctx context.Context, s *session, what, id string, f nostr.Filter) (page, error) {
	var p page
	if s.plain {
		f = plainShape(f)
	}
	msgs, unsub := s.subscribe(id)
	defer unsub()
	notices, unwatch := s.watchNotices(id)
	defer unwatch()
	req := nostr.ClientMessage{Type: nostr.MsgReq, SubID: id, Filters: []nostr.Filter{f}}
	if err := s.send(req); err != nil {
		return p, err
	}
	defer s.send(nostr.ClientMessage{Type: nostr.MsgClose, SubID: id})
	authTried, answered := false, false
	for {
		m, err := g.await(ctx, s, msgs, notices, errBroken)
		if err != nil {
			return p, err
		}
		switch m.Type {
		case nostr.MsgEvent:
			answered = true
			p.add(m.Event.CreatedAt)
			p.ids = append(p.ids, m.Event.ID)
			if err := g.ingest(ctx, m.Event); err != nil {
				return p, err
			}
		case nostr.MsgEOSE:
			return p, nil
		case nostr.MsgNotice:
			if answered {
				continue // about something else: this REQ was parsed
			}
			return p, g.refusedREQ(s, what, m.Text)
		case nostr.MsgClosed:
			if prefix(m.Text) == "auth-required" && !authTried {
				authTried = true
				if err := s.authenticate(ctx); err != nil {
					return p, err
				}
				p = page{}
				if err := s.send(req); err != nil {
					return p, err
				}
				continue
			}
			return p, g.refusedREQ(s, what, m.Text)
		}
	}
}

// refusedREQ turns a NOTICE or CLOSED answering a REQ into errShape (and
// degrades the session) or, in the plain shape, a *refusal.
func (g *Gateway) refusedREQ(s *session, what, text string) error {
	if !s.plain {
		g.degrade(s, what, text)
		return fmt.Errorf("%w (it said %q)", errShape, text)
	}
	r := &refusal{what: what, text: text}
	g.refused(r)
	return r
}

// walk guesses what a since-window walk has left. It goes newest first,
// from when it began back to since, and the events it has seen cover the
// created_at seconds from the start down to the last page's oldest: the
// rest of the window is guessed at the same density. A window reaching
// back to the start of time has no such measure; while pages come full it
// guesses one more page.
type walk struct {
	t            *progress.Tracker
	start, since int64
	pageSize     int
	seen         int64
}

func newWalk(t *progress.Tracker, since int64, pageSize int) *walk {
	return &walk{t: t, start: time.Now().Unix(), since: since, pageSize: pageSize}
}

// page records one page of the walk (full: it held a whole page size,
// so the walk goes on) and updates the guess of what is left.
func (w *walk) page(p page, full bool) {
	w.seen += int64(p.n)
	w.t.Resolved(p.n)
	switch {
	case !full:
		w.t.Estimate(0)
	case w.since <= 0:
		w.t.Estimate(int64(w.pageSize))
	default:
		covered := max(1, w.start-p.oldest)
		w.t.Estimate(w.seen * max(0, p.oldest-w.since) / covered)
	}
}

// page tracks one page of a since-window walk.
type page struct {
	n              int
	oldest, newest int64
	// ids are the events' ids, in the order they came.
	ids [][32]byte
}

func (p *page) add(createdAt int64) {
	if p.n == 0 || createdAt < p.oldest {
		p.oldest = createdAt
	}
	if p.n == 0 || createdAt > p.newest {
		p.newest = createdAt
	}
	p.n++
}

// oneSecond reports whether a full page holds a single created_at, so
// moving until to its oldest would return the same page again.
func (p page) oneSecond() bool { return p.n > 0 && p.oldest == p.newest }

// secondSweep is how many times page_size one REQ asks for when a whole
// page shares one second: the backend's own limit may still hide some of
// that second's events, which only NIP-77 can enumerate.
const secondSweep = 10

// pageIn walks the backend newest first in pages of page_size from now
// back to the window's since: the catch-up for backends without NIP-77.
// The next page's until is the oldest created_at seen (its repeats are
// deduplicated); a page of one second is swept with a larger limit and the
// walk goes on below it.
func (g *Gateway) pageIn(ctx context.Context, s *session, f nostr.Filter) error {
	w := inWalk{f: f, est: newWalk(g.progress[dirToMesh], f.Since, g.s.PageSize)}
	for !w.done {
		if err := g.inStep(ctx, s, &w); err != nil {
			return err
		}
	}
	return nil
}

// inWalk is where a newest-first walk of the backend for one filter
// stands: f's until is the next page's.
type inWalk struct {
	f    nostr.Filter
	page int
	done bool
	// est reports the walk's progress (nil: it is not a catch-up's).
	est *walk
}

// inStep asks the backend for the next page of w (and sweeps its second
// when the page holds one), storing what may cross. A backend that cannot
// parse until gets the plain catch-up instead, which ends the walk.
func (g *Gateway) inStep(ctx context.Context, s *session, w *inWalk) error {
	if s.plain {
		w.done = true
		return g.plainIn(ctx, s, w.f)
	}
	f := w.f
	f.Limit, f.HasLimit = g.s.PageSize, true
	i := w.page
	w.page++
	p, plain, err := g.stepRequest(ctx, s, w, "page-"+strconv.Itoa(i), f, f)
	if plain || err != nil {
		return err
	}
	if w.est != nil {
		w.est.page(p, p.n >= g.s.PageSize)
	}
	if p.n < g.s.PageSize {
		w.done = true
		return nil
	}
	w.f.Until, w.f.HasUntil = p.oldest, true
	if p.oneSecond() {
		sweep := f
		sweep.Since, sweep.Limit = max(f.Since, p.oldest), g.s.PageSize*secondSweep
		sp, plain, err := g.stepRequest(ctx, s, w, "second-"+strconv.Itoa(i), sweep, f)
		if plain || err != nil {
			return err
		}
		if w.est != nil {
			g.progress[dirToMesh].Resolved(sp.n)
		}
		if sp.n >= sweep.Limit {
			g.log.Warn("gateway: the backend has more events in one second than it serves in one REQ; some may not be caught up without NIP-77", "created_at", p.oldest)
		}
		w.f.Until = p.oldest - 1
	}
	w.done = w.f.Until < w.f.Since
	return nil
}

// stepRequest asks the backend for one page of w, by filter f. A backend
// that refuses f's shape ends the walk with one plain REQ of fallback
// instead (plain is then true, and err is the plain REQ's).
func (g *Gateway) stepRequest(ctx context.Context, s *session, w *inWalk, id string, f, fallback nostr.Filter) (p page, plain bool, err error) {
	p, err = g.request(ctx, s, "catch-up", id, f)
	if errors.Is(err, errShape) {
		w.done = true
		return p, true, g.plainIn(ctx, s, fallback)
	}
	return p, false, err
}

// plainIn is the catch-up from a backend that parses no limit, since or
// until: one REQ of the plain filter, which returns what the backend
// serves for it (its newest events, up to its own limit); ingest keeps
// only what the configured filters take.
func (g *Gateway) plainIn(ctx context.Context, s *session, f nostr.Filter) error {
	p, err := g.request(ctx, s, "catch-up", "plain", f)
	g.progress[dirToMesh].Resolved(p.n)
	if err == nil {
		g.log.Info("gateway: plain catch-up from a backend without limit/since/until", "events", p.n)
	}
	return err
}

// pageOut walks the local store newest first in pages and publishes every
// event in the window; the backend answers "duplicate:" for what it has. A
// page of one second is published whole (the local store has no limit).
func (g *Gateway) pageOut(ctx context.Context, s *session, f nostr.Filter) error {
	w := newWalk(g.progress[dirToBackend], f.Since, g.s.PageSize)
	for {
		p, err := g.publishRange(ctx, s, f, g.s.PageSize)
		if err != nil {
			return err
		}
		w.page(p, p.n >= g.s.PageSize)
		if p.n < g.s.PageSize {
			return nil
		}
		f.Until, f.HasUntil = p.oldest, true
		if p.oneSecond() {
			second := f
			second.Since = max(f.Since, p.oldest)
			sp, err := g.publishRange(ctx, s, second, g.s.MaxSyncRecords)
			if err != nil {
				return err
			}
			g.progress[dirToBackend].Resolved(sp.n)
			f.Until = p.oldest - 1
		}
		if f.Until < f.Since {
			return nil
		}
	}
}

// publishRange publishes up to limit local events matching f, newest
// first.
func (g *Gateway) publishRange(ctx context.Context, s *session, f nostr.Filter, limit int) (page, error) {
	var p page
	var batch []*nostr.Event
	err := g.store.Query(ctx, &f, limit, func(ev *nostr.Event) bool {
		p.add(ev.CreatedAt)
		batch = append(batch, ev)
		return true
	})
	if err != nil {
		return p, fmt.Errorf("gateway: walk local events: %w", err)
	}
	for _, ev := range batch {
		if err := g.publishChecked(ctx, s, ev); err != nil {
			return p, err
		}
	}
	return p, nil
}

// publishLocal publishes the local events the backend lacks.
func (g *Gateway) publishLocal(ctx context.Context, s *session, ids []negentropy.ID) error {
	for start := 0; start < len(ids); start += fetchChunk {
		part := ids[start:min(start+fetchChunk, len(ids))]
		f := nostr.Filter{IDs: make([][32]byte, len(part))}
		for i, id := range part {
			f.IDs[i] = id
		}
		var batch []*nostr.Event
		if err := g.store.Query(ctx, &f, len(part), func(ev *nostr.Event) bool {
			batch = append(batch, ev)
			return true
		}); err != nil {
			return fmt.Errorf("gateway: load local events: %w", err)
		}
		for _, ev := range batch {
			if err := g.publishChecked(ctx, s, ev); err != nil {
				return err
			}
		}
		g.progress[dirToBackend].Resolved(len(part))
	}
	return nil
}

// publishChecked publishes a local event found by a catch-up, if the
// filters and the policy let it cross.
func (g *Gateway) publishChecked(ctx context.Context, s *session, ev *nostr.Event) error {
	if !nostr.MatchesAny(g.s.ToBackend, ev) {
		return nil
	}
	if g.policy.Allow(ev, boundary.ToBackend) != nil {
		g.m.refused.WithLabelValues(dirToBackend).Inc()
		return nil
	}
	return g.publish(ctx, s, ev)
}
