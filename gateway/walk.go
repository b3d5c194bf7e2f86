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
// stands: the next page holds events at or before until (from the newest
// while bounded is false), less the ids of the second until already seen.
type outWalk struct {
	f       nostr.Filter
	until   int64
	bounded bool
	seen    map[[32]byte]bool
	done    bool
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
		ow := outWalk{until: f.Until, bounded: f.HasUntil}
		f.Until, f.HasUntil = 0, false
		ow.f = f
		w.out = append(w.out, ow)
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
	batch, err := w.next(ctx, g.store)
	if err != nil || len(batch) == 0 {
		return err
	}
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

// next returns the walk's next fetchChunk local events, newest first, and
// moves it on; fewer than that when the store has no more, and then the
// walk is done.
func (w *outWalk) next(ctx context.Context, st Store) ([]*nostr.Event, error) {
	f := w.f
	f.Until, f.HasUntil = w.until, w.bounded
	var batch []*nostr.Event
	err := st.Query(ctx, &f, fetchChunk+len(w.seen), func(ev *nostr.Event) bool {
		if w.bounded && ev.CreatedAt == w.until && w.seen[ev.ID] {
			return true
		}
		batch = append(batch, ev)
		return len(batch) < fetchChunk
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: walk local events: %w", err)
	}
	for _, ev := range batch {
		if !w.bounded || w.seen == nil || ev.CreatedAt != w.until {
			w.until, w.bounded, w.seen = ev.CreatedAt, true, map[[32]byte]bool{}
		}
		w.seen[ev.ID] = true
	}
	// Fewer than asked for: the store has no more (at most len(seen)
	// were skipped, and the limit allowed for them).
	w.done = len(batch) < fetchChunk
	return batch, nil
}
