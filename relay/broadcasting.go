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

// queued is an event waiting for delivery, its number, and its position:
// the change feed's sequence number when it came from a shared store's
// feed (Relay.FeedHead set), else its number again. A subscription's
// stored answer is remembered until the delivery passes the position
// its EOSE saw (subscription.trimAt).
type queued struct {
	ev  *nostr.Event
	seq uint64
	pos uint64
	// hooks, when set, runs the OnStored hooks once the event is
	// delivered: an event from the feed (Relay.Deliver).
	hooks func()
}

func newFanout(r *Relay) *fanout {
	f := &fanout{r: r}
	f.room = sync.NewCond(&f.mu)
	f.idle = sync.NewCond(&f.mu)
	return f
}

// add queues ev for delivery, waiting while the queue is full. pos is its
// position in the feed, 0 for an event not from one; hooks, if not nil,
// runs after it is delivered.
func (f *fanout) add(ev *nostr.Event, pos uint64, hooks func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.queue) >= fanoutQueue {
		f.room.Wait()
	}
	seq := f.seq.Add(1)
	if pos == 0 && f.r.FeedHead == nil {
		// Without a feed an event's number is its position; with one,
		// an ephemeral event has none (0).
		pos = seq
	}
	f.queue = append(f.queue, queued{ev, seq, pos, hooks})
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
			f.r.broadcast(q.ev, q.seq, q.pos)
			if q.hooks != nil {
				q.hooks()
			}
		}
	}
}

// opened is the number a subscription opening now remembers.
func (f *fanout) opened() uint64 { return f.seq.Load() }

// position is what a subscription's EOSE remembers without a feed: the
// number of the last event queued. Every event the stored answer read was
// queued by then, but for one whose save returned as the query read it
// and that is queued a moment later, which may reach the subscription
// twice; with a feed the position is exact (Relay.FeedHead).
func (f *fanout) position() uint64 { return f.seq.Load() }

// wait returns once no worker is running.
func (f *fanout) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.running {
		f.idle.Wait()
	}
}

// broadcast sends the event queued as seq, at position pos, to every live
// subscription it matches that was open when it was queued. A subscriber
// too slow to take it is cut (conn.sendLive), never skipped.
func (r *Relay) broadcast(ev *nostr.Event, seq, pos uint64) {
	var frame []byte
	r.mu.RLock()
	defer r.mu.RUnlock()
	for c := range r.conns {
		c.deliver(ev, seq, pos, &frame)
	}
}

// Deliver hands the relay an event another front-end of this node, or
// this one, stored in the store they share, as the store's change feed
// gives it at position seq (frontend.Follower calls it, in feed order,
// once per position). It reaches the live subscriptions it matches, each
// once: a subscription whose stored answer had it is not given it again.
// The OnStored hooks then run, with the origin the event was accepted
// with here, or FromFrontEnd when another front-end accepted it.
// It waits while the delivery queue is full.
func (r *Relay) Deliver(ev *nostr.Event, seq uint64) {
	from, local := r.feedOrigins.take(ev.ID)
	if !local {
		from = FromFrontEnd
	}
	var hooks func()
	if len(r.OnStored) > 0 {
		hooks = func() {
			for _, h := range r.OnStored {
				h(ev, from)
			}
		}
	}
	r.fanout.add(ev, seq, hooks)
}

// feedOrigins remembers where the events this front-end stored came from
// until the feed delivers them (Relay.Deliver), so that the OnStored
// hooks see an event from the mesh as from the mesh. An entry lives from
// the save to its delivery; one whose delivery never comes (the save
// failed after the commit) is dropped once maxFeedOrigins are waiting.
type feedOrigins struct {
	mu sync.Mutex
	m  map[[32]byte]Origin
}

// maxFeedOrigins bounds feedOrigins: far more saves than can be waiting
// for the feed at once.
const maxFeedOrigins = 1 << 16

func (o *feedOrigins) put(id [32]byte, from Origin) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= maxFeedOrigins {
		o.m = make(map[[32]byte]Origin)
	}
	o.m[id] = from
}

func (o *feedOrigins) take(id [32]byte) (Origin, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	from, ok := o.m[id]
	delete(o.m, id)
	return from, ok
}
