package didcomm

import (
	"sync"
	"time"
)

// Replay-guard defaults.
const (
	// DefaultReplayWindow is how long a message id is remembered, and so how
	// old a message's created_time may be.
	DefaultReplayWindow = 10 * time.Minute
	// DefaultReplayEntries bounds the ids remembered at once.
	DefaultReplayEntries = 100_000
)

// ReplayGuard remembers the (sender, id) of messages accepted within a
// window and refuses a second copy. Messages created before the window are
// refused as stale, so an id forgotten because it left the window cannot be
// replayed either. When more than the bound of ids arrive within one
// window the oldest are forgotten early: the bound wins over the window, so
// memory stays bounded under a flood.
type ReplayGuard struct {
	window time.Duration
	max    int

	mu    sync.Mutex
	seen  map[string]time.Time // key → when it may be forgotten
	order []string             // keys in arrival order
}

// NewReplayGuard returns a guard with the given window and bound.
func NewReplayGuard(window time.Duration, maxEntries int) *ReplayGuard {
	return &ReplayGuard{window: window, max: maxEntries, seen: make(map[string]time.Time)}
}

// check records the message or refuses it.
func (g *ReplayGuard) check(sender, id string, created int64, now time.Time) error {
	if created > 0 && time.Unix(created, 0).Before(now.Add(-g.window)) {
		return problemf(CodeExpired, "message %s was created %s ago, before the replay window of %s", id, now.Sub(time.Unix(created, 0)).Round(time.Second), g.window)
	}
	key := sender + "\x00" + id
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.order) > 0 {
		k := g.order[0]
		if exp, ok := g.seen[k]; ok && now.Before(exp) && len(g.order) < g.max {
			break
		}
		delete(g.seen, k)
		g.order = g.order[1:]
	}
	if _, dup := g.seen[key]; dup {
		return problemf(CodeReplay, "message %s from %q was already received", id, sender)
	}
	g.seen[key] = now.Add(g.window)
	g.order = append(g.order, key)
	return nil
}
