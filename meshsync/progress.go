package meshsync

import (
	"log/slog"
	"sync"
	"time"
)

// Progress is how far the node is through moving what the sync sessions it
// started found missing, here (fetched from the peer) or at the peer
// (pushed to it): one catch-up runs from the first missing id found while
// nothing was pending until nothing is. A new node catches up by both:
// by its own sessions' fetches, and by its peers' sessions, which push
// and show in their progress. Pending and Total are estimates: two
// co-holders missing from the same node count the same id twice, and the
// second transfer finds it stored already.
type Progress struct {
	// Active is true while ids found missing are still to be moved.
	Active bool
	// Pending is the ids found missing and not yet moved (or given up
	// when their session failed).
	Pending int64
	// Moved is the ids this catch-up has resolved; Total is Moved plus
	// Pending, the estimate of its size.
	Moved, Total int64
	// Started is when this catch-up began (the last one's, when none
	// runs); Elapsed how long it has run or ran.
	Started time.Time
	Elapsed time.Duration
	// Rate is Moved per second of Elapsed; Left is Pending at that
	// rate, zero when unknown.
	Rate float64
	Left time.Duration
}

// progressLogMin is the catch-up size, in ids, from which the service logs
// progress: a routine sync round that fetches a few events says nothing.
const progressLogMin = 1000

// progressLogEvery spaces the progress lines of a long catch-up.
const progressLogEvery = 10 * time.Second

// progress tracks the current catch-up across concurrent sessions.
type progress struct {
	mu      sync.Mutex
	now     func() time.Time
	pending int64
	moved   int64
	started time.Time
	ended   time.Time
	logged  time.Time
}

// found records n ids a session will move.
func (p *progress) found(n int) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending == 0 {
		p.moved, p.started, p.ended, p.logged = 0, p.now(), time.Time{}, time.Time{}
	}
	p.pending += int64(n)
}

// resolved records n ids moved or given up, and logs the catch-up's
// progress (at most every progressLogEvery) and its end when it is large.
func (p *progress) resolved(n int, log *slog.Logger) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = max(0, p.pending-int64(n))
	p.moved += int64(n)
	now := p.now()
	if p.pending == 0 {
		p.ended = now
	}
	if p.moved+p.pending < progressLogMin {
		return
	}
	st := p.snapshot(now)
	switch {
	case !st.Active:
		log.Info("meshsync: caught up", "moved", st.Moved, "in", st.Elapsed.Round(time.Second), "per_second", int(st.Rate))
	case p.logged.IsZero() || now.Sub(p.logged) >= progressLogEvery:
		p.logged = now
		log.Info("meshsync: catching up", "moved", st.Moved, "of_about", st.Total,
			"per_second", int(st.Rate), "left", st.Left.Round(time.Second))
	}
}

// get returns the current or last catch-up's progress.
func (p *progress) get() Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshot(p.now())
}

func (p *progress) snapshot(now time.Time) Progress {
	st := Progress{Active: p.pending > 0, Pending: p.pending, Moved: p.moved, Total: p.moved + p.pending, Started: p.started}
	if p.started.IsZero() {
		return st
	}
	end := now
	if !st.Active && !p.ended.IsZero() {
		end = p.ended
	}
	st.Elapsed = end.Sub(p.started)
	if secs := st.Elapsed.Seconds(); secs > 0 && st.Moved > 0 {
		st.Rate = float64(st.Moved) / secs
		if st.Active {
			st.Left = time.Duration(float64(st.Pending) / st.Rate * float64(time.Second))
		}
	}
	return st
}

// Progress returns how far the current catch-up is, or how the last one
// went when none runs.
func (s *Service) Progress() Progress { return s.progress.get() }
