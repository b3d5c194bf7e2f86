package node

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
)

// clientInterest turns the live subscriptions of the node's own clients
// into author shards the mesh should carry to this node (issue 3: a node
// keeps "what its own clients subscribe to"). Only filters that name
// authors count: a filter over all authors would mean every shard, which is
// the operator's choice ([mesh] subscribe), not a client's. At most max
// distinct shards are held for clients; a shard whose last subscription
// ended is kept for linger, so a client that closes and reopens a REQ does
// not make the node leave and rejoin the topic.
type clientInterest struct {
	m      *mesh.Mesh
	max    int
	linger time.Duration
	log    *slog.Logger
	// changed wakes the loop that applies the set to the mesh, so the
	// relay's hook never waits for GossipSub.
	changed chan struct{}

	mu     sync.Mutex
	count  map[int]int       // shard -> live client subscriptions
	zeroAt map[int]time.Time // shard -> when its count fell to zero
}

func newClientInterest(m *mesh.Mesh, max int, linger time.Duration, log *slog.Logger) *clientInterest {
	return &clientInterest{
		m: m, max: max, linger: linger, log: log,
		changed: make(chan struct{}, 1),
		count:   make(map[int]int),
		zeroAt:  make(map[int]time.Time),
	}
}

// hook is the relay's Interest hook: it counts the subscription's shards
// and returns the release that uncounts them.
func (ci *clientInterest) hook(filters []nostr.Filter) func() {
	var named []nostr.Filter
	for _, f := range filters {
		if len(f.Authors) > 0 {
			named = append(named, f)
		}
	}
	shards := mesh.ShardsFor(named)
	if len(named) == 0 || len(shards) == 0 {
		return nil
	}
	ci.mu.Lock()
	var held []int
	for _, s := range shards {
		_, known := ci.count[s]
		if !known && len(ci.count) >= ci.max {
			continue // over the bound: REQs still reach these through lookups
		}
		ci.count[s]++
		delete(ci.zeroAt, s)
		held = append(held, s)
	}
	ci.mu.Unlock()
	ci.wake()
	return func() {
		now := time.Now()
		ci.mu.Lock()
		for _, s := range held {
			if ci.count[s]--; ci.count[s] == 0 {
				ci.zeroAt[s] = now
			}
		}
		ci.mu.Unlock()
		ci.wake()
	}
}

func (ci *clientInterest) wake() {
	select {
	case ci.changed <- struct{}{}:
	default:
	}
}

// shards returns the shards held for clients now, forgetting those whose
// linger has passed.
func (ci *clientInterest) shards(now time.Time) []int {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	var out []int
	for s, n := range ci.count {
		if n == 0 && now.Sub(ci.zeroAt[s]) >= ci.linger {
			delete(ci.count, s)
			delete(ci.zeroAt, s)
			continue
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// run applies the set to the mesh whenever it changes and when lingering
// shards fall due, until ctx ends.
func (ci *clientInterest) run(ctx context.Context) {
	every := max(ci.linger/4, time.Second)
	var last []int
	periodic.Run(ctx, every, every, ci.changed, func() {
		now := ci.shards(time.Now())
		if slices.Equal(now, last) {
			return
		}
		if err := ci.m.SetInterest(now); err != nil {
			ci.log.Warn("mesh: client interest", "err", err)
			return
		}
		last = now
	})
}
