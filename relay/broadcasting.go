package relay

import (
	"sync"

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
// and Shutdown waits for the one running.
type fanout struct {
	r *Relay

	mu      sync.Mutex
	room    *sync.Cond // signalled as the worker takes events
	queue   []*nostr.Event
	running bool
	wg      sync.WaitGroup
}

func newFanout(r *Relay) *fanout {
	f := &fanout{r: r}
	f.room = sync.NewCond(&f.mu)
	return f
}

// add queues ev for delivery, waiting while the queue is full.
func (f *fanout) add(ev *nostr.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.queue) >= fanoutQueue {
		f.room.Wait()
	}
	f.queue = append(f.queue, ev)
	if !f.running {
		f.running = true
		f.wg.Add(1)
		go f.work()
	}
}

// work delivers queued events until the queue is empty.
func (f *fanout) work() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.running = false
			f.queue = nil // the backing array may have grown large
			f.mu.Unlock()
			return
		}
		batch := f.queue
		f.queue = make([]*nostr.Event, 0, min(len(batch), 64))
		f.room.Broadcast()
		f.mu.Unlock()
		for _, ev := range batch {
			f.r.broadcast(ev)
		}
	}
}

// wait returns once no worker is running.
func (f *fanout) wait() { f.wg.Wait() }

// broadcast sends an event to every live subscription it matches. A
// subscriber too slow to take it is cut (conn.sendLive), never skipped.
func (r *Relay) broadcast(ev *nostr.Event) {
	var frame []byte
	r.mu.RLock()
	defer r.mu.RUnlock()
	for c := range r.conns {
		c.deliver(ev, &frame)
	}
}
