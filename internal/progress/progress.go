// Package progress follows a node's long work, a catch-up of events one
// side has and the other lacks, and says how far it is: items moved of an
// estimated total, the rate, and the time left. The mesh's sync sessions
// (package meshsync) and a gateway's catch-up with its backend (package
// gateway) each keep one Tracker; the node shows them in its log, in
// `fleetmesh status`, in /metrics and on the dashboard.
//
// It is not a scheduler and does no work itself: its owner says what it
// found to do and what it did. Totals are estimates: whoever finds work
// may count an item that turns out done already, and a walk whose size is
// not known up front gives its own guess (Estimate).
package progress

import (
	"log/slog"
	"sync"
	"time"
)

// Progress is how far the current catch-up is, or how the last one went.
// One catch-up runs from the first item found while nothing was pending
// (or from Hold) until nothing is pending and nothing holds it.
type Progress struct {
	// Active is true while the catch-up runs.
	Active bool
	// Pending is the items found and not yet moved (or given up).
	Pending int64
	// Moved is the items this catch-up has resolved; Total is Moved plus
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

// LogMin is the catch-up size, in items, from which a Tracker logs its
// progress: a routine round that moves a few events says nothing.
const LogMin = 1000

// LogEvery spaces the progress lines of a long catch-up.
const LogEvery = 10 * time.Second

// Tracker follows one catch-up at a time across the goroutines that work
// on it. The zero Tracker is not ready: make one with New.
type Tracker struct {
	what   string // the log lines' prefix: "meshsync", "gateway"
	log    *slog.Logger
	logEnd bool
	now    func() time.Time

	mu      sync.Mutex
	holds   int
	failed  bool // the current catch-up was given up (GiveUp)
	pending int64
	moved   int64
	started time.Time
	ended   time.Time
	logged  time.Time
}

// New returns a tracker whose log lines start with what ("meshsync:
// catching up") and go to log, with its attributes. With logEnd false the
// tracker logs no line when a catch-up ends, for an owner that logs its
// own with what else it knows (Get has the figures).
func New(what string, log *slog.Logger, logEnd bool) *Tracker {
	return &Tracker{what: what, log: log, logEnd: logEnd, now: time.Now}
}

// active reports whether a catch-up runs; t.mu is held.
func (t *Tracker) active() bool { return t.pending > 0 || t.holds > 0 }

// begin starts a catch-up if none runs; t.mu is held.
func (t *Tracker) begin() {
	if !t.active() {
		t.moved, t.pending, t.failed = 0, 0, false
		t.started, t.ended, t.logged = t.now(), time.Time{}, time.Time{}
	}
}

// Hold keeps a catch-up running until the returned release is called,
// even while nothing is pending: one that finds its work in several steps
// (a filter at a time, a page at a time) stays one catch-up. Release is
// safe to call more than once.
func (t *Tracker) Hold() (release func()) {
	t.mu.Lock()
	t.begin()
	t.holds++
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.holds--
			t.settle(0)
		})
	}
}

// Found records n more items to move.
func (t *Tracker) Found(n int) {
	if n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.begin()
	t.pending += int64(n)
}

// Estimate replaces the items still to move with a new guess, for work
// whose size shows only as it goes (a walk back through time, say). It
// does nothing while no catch-up runs.
func (t *Tracker) Estimate(pending int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active() {
		t.pending = max(0, pending)
		t.settle(0)
	}
}

// GiveUp drops what the current catch-up still had to move, because its
// work failed (a broken connection, say): it ends once nothing holds it,
// and its end is logged as stopped, not caught up. The next Found or Hold
// starts a new one.
func (t *Tracker) GiveUp() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active() {
		t.pending, t.failed = 0, true
		t.settle(0)
	}
}

// Resolved records n items moved or given up, and logs the catch-up's
// progress (at most every LogEvery) and its end when it is large.
func (t *Tracker) Resolved(n int) {
	if n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active() {
		return // an item of a catch-up that already ended
	}
	t.pending = max(0, t.pending-int64(n))
	t.moved += int64(n)
	t.settle(n)
}

// settle ends the catch-up once nothing is pending or held, and logs its
// end, or its progress when the caller just moved some (moved > 0), for
// catch-ups of LogMin items or more. t.mu is held.
func (t *Tracker) settle(moved int) {
	now := t.now()
	ended := false
	if !t.active() && t.ended.IsZero() && !t.started.IsZero() {
		t.ended, ended = now, true
	}
	if t.moved+t.pending < LogMin {
		return
	}
	st := t.snapshot(now)
	switch {
	case ended && !t.logEnd:
	case ended && t.failed:
		t.log.Info(t.what+": catch-up stopped", "moved", st.Moved, "in", st.Elapsed.Round(time.Second), "per_second", int(st.Rate))
	case ended:
		t.log.Info(t.what+": caught up", "moved", st.Moved, "in", st.Elapsed.Round(time.Second), "per_second", int(st.Rate))
	case st.Active && moved > 0 && (t.logged.IsZero() || now.Sub(t.logged) >= LogEvery):
		t.logged = now
		t.log.Info(t.what+": catching up", "moved", st.Moved, "of_about", st.Total,
			"per_second", int(st.Rate), "left", st.Left.Round(time.Second))
	}
}

// Get returns the current or last catch-up's progress.
func (t *Tracker) Get() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snapshot(t.now())
}

func (t *Tracker) snapshot(now time.Time) Progress {
	st := Progress{Active: t.active(), Pending: t.pending, Moved: t.moved, Total: t.moved + t.pending, Started: t.started}
	if t.started.IsZero() {
		return st
	}
	end := now
	if !st.Active && !t.ended.IsZero() {
		end = t.ended
	}
	st.Elapsed = end.Sub(t.started)
	if secs := st.Elapsed.Seconds(); secs > 0 && st.Moved > 0 {
		st.Rate = float64(st.Moved) / secs
		if st.Active {
			st.Left = time.Duration(float64(st.Pending) / st.Rate * float64(time.Second))
		}
	}
	return st
}
