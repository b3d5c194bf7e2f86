package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"fleetmesh.org/fleetmesh/nostr"
)

// fullWalk is the catch-up that makes a connection lossless when NIP-77
// cannot: after the since-window catch-up, each direction that fell back to
// since windows is compared over all time, one step at a time while the
// live queue is empty (spec/gateway.md, "The full walk").
//
// Why: a created_at cursor misses an event that arrived (on either side)
// with a created_at older than cursor − overlap just before a crash or
// while the connection was down. Only a comparison of the whole filter
// finds it, and without NIP-77 that means reading it all: backend → mesh
// pages the backend newest first with until (each page's events are
// stored, the store deduplicating); mesh → backend pages the local store
// newest first and asks the backend which of each page's ids it has
// (REQ {"ids": …}, which even a backend that parses no since, until or
// limit reads), publishing the rest.
//
// It is not resumed across connections: a gap (the connection down, or
// the gateway stopped) can add events at any created_at, above a walk's
// position as well as below it, so only a walk that starts after the last
// gap and completes covers every event present when it started.
type fullWalk struct {
	// in walks the to_mesh filters on the backend; nil when not due.
	in  []inWalk
	out []outWalk
}

// outWalk is where a newest-first walk of the local store for one filter
// stands: the next page holds events at or before until, less the ids of
// the second until already seen.
type outWalk struct {
	f     nostr.Filter
	until int64
	seen  map[[32]byte]bool
	done  bool
}

// newFullWalk returns the walk of in (on the backend) and out (in the
// local store), as catchUpIn and catchUpOut left them; nil when there is
// nothing to walk. A session that degraded to plain filters cannot page
// the backend, so in is left out (spec/gateway.md, "Known limits").
func newFullWalk(s *session, in, out []nostr.Filter) *fullWalk {
	w := &fullWalk{}
	if !s.plain {
		for _, f := range in {
			w.in = append(w.in, inWalk{f: f})
		}
	}
	for _, f := range out {
		until := int64(-1)
		if f.HasUntil {
			until = f.Until
		}
		f.Until, f.HasUntil = 0, false
		w.out = append(w.out, outWalk{f: f, until: until})
	}
	if len(w.in)+len(w.out) == 0 {
		return nil
	}
	return w
}

// walkStep runs one page of the walk and reports whether it is over.
func (g *Gateway) walkStep(ctx context.Context, s *session, w *fullWalk) (bool, error) {
	for i := range w.in {
		if !w.in[i].done {
			return false, g.inStep(ctx, s, &w.in[i])
		}
	}
	for i := range w.out {
		if !w.out[i].done {
			return false, g.outStep(ctx, s, &w.out[i])
		}
	}
	return true, nil
}

// outStep reads the next fetchChunk local events of w, asks the backend
// which of them it has, and publishes those it lacks.
func (g *Gateway) outStep(ctx context.Context, s *session, w *outWalk) error {
	f := w.f
	if w.until >= 0 {
		f.Until, f.HasUntil = w.until, true
	}
	var batch []*nostr.Event
	err := g.store.Query(ctx, &f, fetchChunk+len(w.seen), func(ev *nostr.Event) bool {
		if ev.CreatedAt == w.until && w.seen[ev.ID] {
			return true
		}
		batch = append(batch, ev)
		return len(batch) < fetchChunk
	})
	if err != nil {
		return fmt.Errorf("gateway: walk local events: %w", err)
	}
	if len(batch) == 0 {
		w.done = true
		return nil
	}
	for _, ev := range batch {
		if ev.CreatedAt != w.until {
			w.until, w.seen = ev.CreatedAt, map[[32]byte]bool{}
		}
		w.seen[ev.ID] = true
	}
	// Fewer than asked for: the store has no more (at most len(seen)
	// were skipped, and the limit allowed for them).
	w.done = len(batch) < fetchChunk
	ids := nostr.Filter{IDs: make([][32]byte, len(batch)), Limit: len(batch), HasLimit: true}
	for i, ev := range batch {
		ids.IDs[i] = ev.ID
	}
	p, err := g.request(ctx, s, "fetch", "walk-out", ids)
	if errors.Is(err, errShape) {
		p, err = g.request(ctx, s, "fetch", "walk-out", ids)
	}
	if err != nil {
		return err
	}
	for _, ev := range batch {
		if slices.Contains(p.ids, ev.ID) {
			continue
		}
		if err := g.publishChecked(ctx, s, ev); err != nil {
			return err
		}
	}
	return nil
}

// walked counts and logs a full walk that is over.
func (g *Gateway) walked(w *fullWalk) {
	if len(w.in) > 0 {
		g.m.catchups.WithLabelValues(dirToMesh, "full-walk").Inc()
	}
	if len(w.out) > 0 {
		g.m.catchups.WithLabelValues(dirToBackend, "full-walk").Inc()
	}
	g.log.Info("gateway: full walk done: every event present when the connection caught up was compared", "to_mesh", len(w.in) > 0, "to_backend", len(w.out) > 0)
}
