package gateway

import (
	"context"
	"sync"

	"fleetmesh.org/fleetmesh/nostr"
)

// queue is the bounded FIFO of live events waiting for the backend. An
// event already queued is not queued twice.
type queue struct {
	mu    sync.Mutex
	items []*nostr.Event
	ids   map[[32]byte]struct{}
	max   int
	wake  chan struct{}
}

func newQueue(max int) *queue {
	return &queue{ids: make(map[[32]byte]struct{}), max: max, wake: make(chan struct{}, 1)}
}

// push queues ev; it reports false when the queue is full.
func (q *queue) push(ev *nostr.Event) (queued, full bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, dup := q.ids[ev.ID]; dup {
		return false, false
	}
	if len(q.items) >= q.max {
		return false, true
	}
	q.items = append(q.items, ev)
	q.ids[ev.ID] = struct{}{}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true, false
}

// peek returns the oldest queued event without removing it, waiting for
// one until ctx ends.
func (q *queue) peek(ctx context.Context) (*nostr.Event, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			ev := q.items[0]
			q.mu.Unlock()
			return ev, nil
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// remove takes the oldest event off the queue once it is delivered.
func (q *queue) remove(ev *nostr.Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) > 0 && q.items[0] == ev {
		q.items[0] = nil
		q.items = q.items[1:]
		delete(q.ids, ev.ID)
	}
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}
