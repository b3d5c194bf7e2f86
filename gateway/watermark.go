package gateway

import (
	"math"
	"sync"
)

// watermark is one direction's cursor: the start of the last completed
// catch-up, held back by the created_at of every event that is still on
// its way (received but not yet durable, or queued but not yet
// acknowledged) and of every event dropped since that catch-up began. Its
// value is what may be persisted: everything older than it, minus the
// overlap, has crossed.
type watermark struct {
	mu      sync.Mutex
	base    int64
	pending map[[32]byte]pendingEntry
	dropped int64 // math.MaxInt64: none
}

type pendingEntry struct {
	createdAt int64
	refs      int
}

func newWatermark(base int64) *watermark {
	return &watermark{base: base, pending: make(map[[32]byte]pendingEntry), dropped: math.MaxInt64}
}

// add marks an event as on its way.
func (w *watermark) add(id [32]byte, createdAt int64) {
	w.mu.Lock()
	e := w.pending[id]
	e.createdAt = createdAt
	e.refs++
	w.pending[id] = e
	w.mu.Unlock()
}

// done marks an event as durable on the other side (or finally refused).
func (w *watermark) done(id [32]byte) {
	w.mu.Lock()
	if e, ok := w.pending[id]; ok {
		if e.refs <= 1 {
			delete(w.pending, id)
		} else {
			e.refs--
			w.pending[id] = e
		}
	}
	w.mu.Unlock()
}

// drop records an event that was given up without crossing (the queue was
// full); the next catch-up must reach back to it.
func (w *watermark) drop(id [32]byte, createdAt int64) {
	w.mu.Lock()
	delete(w.pending, id)
	w.dropped = min(w.dropped, createdAt)
	w.mu.Unlock()
}

// hasDropped reports whether a catch-up is owed for dropped events.
func (w *watermark) hasDropped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped != math.MaxInt64
}

// start returns the cursor a catch-up starting now should use, and
// forgets drops: the catch-up covers them (a drop during it is recorded
// anew).
func (w *watermark) start() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := min(w.base, w.dropped)
	w.dropped = math.MaxInt64
	return v
}

// complete records a finished catch-up that started at t.
func (w *watermark) complete(t int64) {
	w.mu.Lock()
	w.base = t
	w.mu.Unlock()
}

// value is the cursor to persist.
func (w *watermark) value() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := min(w.base, w.dropped)
	for _, e := range w.pending {
		v = min(v, e.createdAt)
	}
	return v
}
