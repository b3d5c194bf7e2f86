package relay

import (
	"sync"
	"sync/atomic"

	"fleetmesh.org/fleetmesh/nostr"
)

// fanoutQueue bounds the stored events waiting to be delivered to live
// subscriptions. A publisher whose event finds it full waits for room
// before its OK: live delivery is never dropped to make room, and the
// queue's memory is bounded.
const fanoutQueue = 4096

// fanout delivers stored events to live subscriptions off the path that
// answers the publisher: accept queues the event and returns, and one
// worker at a time delivers the queue in order. The worker runs only
// while the queue is not empty, so an idle relay has no goroutine for it,
// and Shutdown waits for the one running. That wait is on a condition, not
// a sync.WaitGroup: events from the mesh keep arriving during Shutdown,
// and a WaitGroup may not be added to from zero while it is waited on.
type fanout struct {
	r *Relay

	mu      sync.Mutex
	room    *sync.Cond // signalled as the worker takes events
	idle    *sync.Cond // signalled as the worker stops
	queue   []queued
	running bool
	// seq numbers the events queued so far. A subscription remembers it
	// when it opens and is given only events queued after that: one
	// queued before was stored before, so its REQ's stored part finds it.
	seq atomic.Uint64
}

// queued is an event waiting for delivery and its number.
type queued struct {
	ev  *nostr.Event
	seq uint64
}

func newFanout(r *Relay) *fanout {
	f := &fanout{r: r}
	f.room = sync.NewCond(&f.mu)
	f.idle = sync.NewCond(&f.mu)
	return f
}

// add queues ev for delivery, waiting while the queue is full.
func (f *fanout) add(ev *nostr.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.queue) >= fanoutQueue {
		f.room.Wait()
	}
	f.queue = append(f.queue, queued{ev, f.seq.Add(1)})
	if !f.running {
		f.running = true
		go f.work()
	}
}

// work delivers queued events until the queue is empty.
func (f *fanout) work() {
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.running = false
			f.queue = nil // the backing array may have grown large
			f.idle.Broadcast()
			f.mu.Unlock()
			return
		}
		batch := f.queue
		f.queue = make([]queued, 0, min(len(batch), 64))
		f.room.Broadcast()
		f.mu.Unlock()
		for _, q := range batch {
			f.r.broadcast(q.ev, q.seq)
		}
	}
}

// opened is the number a subscription opening now remembers.
func (f *fanout) opened() uint64 { return f.seq.Load() }

// wait returns once no worker is running.
func (f *fanout) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.running {
		f.idle.Wait()
	}
}

// broadcast sends the event queued as seq to every live subscription it
// matches that was open when it was queued. A subscriber too slow to
// take it is cut (conn.sendLive), never skipped.
func (r *Relay) broadcast(ev *nostr.Event, seq uint64) {
	var frame []byte
	r.mu.RLock()
	defer r.mu.RUnlock()
	for c := range r.conns {
		c.deliver(ev, seq, &frame)
	}
}
