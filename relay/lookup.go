package relay

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// lookupSaves bounds the events of one lookup being saved at once: enough
// for the store's batching writer to commit them together.
const lookupSaves = 32

// stored is one event of an answer: its id, created_at and EVENT frame.
type stored struct {
	id        [32]byte
	createdAt int64
	frame     []byte
}

// answerWithLookup answers one filter as one relay holding both this
// node's store and the mesh's would (spec/relay.md "Reads across the
// mesh"). What the lookup brings is never sent as it came: it is admitted
// as every event from the mesh is (Relay.AddEvent: signature, the
// RejectEvent policies, then the store's kind rules against this node's
// state: NIP-09 deletions by id and by address, replaceable and
// addressable precedence, NIP-40 expiry) and stored. When that changed
// what the filter matches, the filter is answered from the store again, so
// the answer is always what the store holds once the lookup's events are
// in: no deleted, superseded or expired event, and only events this
// connection may read. The stored part waits for the mesh at most
// LookupTimeout (and the saves of what it found). What the lookup stored
// reaches other live subscriptions as any event from the mesh does, but
// not sub, whose answer has it.
func (c *conn) answerWithLookup(ctx context.Context, subID string, sub *subscription, f *nostr.Filter, seen map[[32]byte]struct{}) (head uint64, known bool, err error) {
	limit := c.limitOf(f)
	held, head, known, err := c.collectStored(ctx, subID, f, limit)
	if err != nil {
		return 0, false, err
	}
	if lf := lookupFilter(f, held); lf != nil {
		lctx, lcancel := context.WithTimeout(ctx, c.r.cfg.LookupTimeout.Duration)
		changed := c.r.absorbLookup(lctx, lf, limit, held, func(id [32]byte) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if sub.absorbed == nil {
				sub.absorbed = make(map[[32]byte]struct{})
			}
			sub.absorbed[id] = struct{}{}
		})
		lcancel()
		if changed && ctx.Err() == nil {
			if held, head, known, err = c.collectStored(ctx, subID, f, limit); err != nil {
				return 0, false, err
			}
		}
	}
	evs := make([]stored, 0, len(held))
	for _, ev := range held {
		if _, dup := seen[ev.id]; !dup {
			evs = append(evs, ev)
		}
	}
	slices.SortFunc(evs, func(a, b stored) int {
		if a.createdAt != b.createdAt {
			return cmp.Compare(b.createdAt, a.createdAt)
		}
		return slices.Compare(a.id[:], b.id[:])
	})
	for _, ev := range evs[:min(len(evs), limit)] {
		seen[ev.id] = struct{}{}
		if !c.claim(sub, ev.id) {
			continue
		}
		c.r.m.sent.Inc()
		if !c.sendEvent(ctx, subID, ev.frame) {
			return head, known, nil
		}
	}
	return head, known, nil
}

// collectStored returns the stored events matching f that this connection
// may read, at most limit, keyed by id, and the feed's position they were
// read at when known (queryStored).
func (c *conn) collectStored(ctx context.Context, subID string, f *nostr.Filter, limit int) (map[[32]byte]stored, uint64, bool, error) {
	held := make(map[[32]byte]stored)
	qctx, qcancel := context.WithTimeout(ctx, c.r.cfg.QueryTimeout.Duration)
	defer qcancel()
	head, known, err := c.queryStored(qctx, f, limit, func(id [32]byte, createdAt int64, appendJSON func([]byte) []byte) bool {
		held[id] = stored{id, createdAt, eventFrame(subID, appendJSON)}
		return true
	})
	return held, head, known, err
}

// lookupFilter is what the mesh is asked for f, given what the store
// answered: an ids filter asks only for the ids not held here (the rest
// would cross the network again, and be counted by both ends' meters, for
// nothing), and needs no lookup at all when every id is held (nil).
func lookupFilter(f *nostr.Filter, held map[[32]byte]stored) *nostr.Filter {
	if f.IDs == nil {
		return f
	}
	missing := make([][32]byte, 0, len(f.IDs))
	asked := make(map[[32]byte]struct{}, len(f.IDs))
	for _, id := range f.IDs {
		_, have := held[id]
		if _, dup := asked[id]; !have && !dup {
			asked[id] = struct{}{}
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	narrowed := *f
	narrowed.IDs = missing
	return &narrowed
}

// absorbLookup asks the Lookup hook for f and admits each event it brings
// that matches f and is not in held (the answer the store already gave)
// through AddEvent, as the mesh's sessions do, FromMesh: the rules of an
// event from a client or a sync, against this node's own state, in one
// place, and what passes is stored, so the node need not ask again. An
// ephemeral event is never an answer to a lookup (no node stores one) and
// is dropped. Each event is told to mine before it is saved. It waits for
// the saves it started and reports whether the answer may have changed: an
// event was stored, or found stored already (by another path meanwhile)
// though held lacked it.
func (r *Relay) absorbLookup(ctx context.Context, f *nostr.Filter, limit int, held map[[32]byte]stored, mine func(id [32]byte)) bool {
	var changed atomic.Bool
	var wg sync.WaitGroup
	sem := make(chan struct{}, lookupSaves)
	// A save that has started finishes even when the REQ ends: what the
	// store took is the node's state now.
	save := context.WithoutCancel(ctx)
	r.Lookup(ctx, f, limit, func(ev *nostr.Event) {
		if _, have := held[ev.ID]; have || nostr.ClassOf(ev.Kind) == nostr.Ephemeral || !f.Matches(ev) {
			return
		}
		mine(ev.ID)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res, err := r.AddEvent(save, ev, FromMesh)
			r.m.lookedUp.WithLabelValues(lookupOutcome(res, err)).Inc()
			if err == nil && (res == eventstore.Stored || res == eventstore.Duplicate) {
				changed.Store(true)
			}
		})
	})
	wg.Wait()
	return changed.Load()
}

// lookupOutcome names what became of an event a lookup brought, for
// fleetmesh_relay_lookup_events_total.
func lookupOutcome(res eventstore.Result, err error) string {
	if err != nil {
		return "refused"
	}
	return res.String()
}
