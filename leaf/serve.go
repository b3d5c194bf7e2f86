package leaf

import (
	"strings"

	"fleetmesh.org/fleetmesh/negentropy"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
)

// DefaultServeBytes bounds the events one wake serves from the leaf's
// cache to its homes (Config.ServeBytes).
const DefaultServeBytes = 4 << 20

// serveEvents offers a home the events of a subscription that the leaf
// holds and the home lacks (have, from the NIP-77 reconciliation), when
// the app allows serving (SetServe): EVENT each, publishWindow at a time,
// within the wake's serve bytes and while receiptReserve is left of its
// budget. An event the home accepts (OK true) is an event and its bytes
// the leaf gave, counted on a metered connection as the home counts it
// (spec/leaf.md "Serving cached data"). A home that answers rate-limited
// or error gets no more in this wake; the next wake's reconciliation
// offers the rest.
func (w *wake) serveEvents(rc *relayConn, have []negentropy.ID) error {
	for start := 0; start < len(have) && w.timeLeft(); start += publishWindow {
		part := have[start:min(start+publishWindow, len(have))]
		ids := make([][32]byte, len(part))
		for i, id := range part {
			ids[i] = id
		}
		held, err := w.l.db.getEvents(ids)
		if err != nil {
			return permanent(err)
		}
		if len(held) == 0 {
			continue // evicted since: only their tombstones are left
		}
		var evs []*nostr.Event
		var sizes []uint64
		for _, ev := range held {
			n := int64(len(ev.AppendJSON(nil)))
			if w.serveLeft.Add(-n) < 0 {
				w.serveLeft.Add(n)
				break
			}
			evs, sizes = append(evs, ev), append(sizes, uint64(n))
		}
		if len(evs) == 0 {
			return nil
		}
		var took, size uint64
		stop := false
		err = rc.publish(evs, publishWindow, func(i int, ok bool, reason string) error {
			switch {
			case ok:
				took, size = took+1, size+sizes[i]
			case strings.HasPrefix(reason, "rate-limited:"), strings.HasPrefix(reason, "error:"):
				stop = true
			}
			return nil
		})
		if took > 0 {
			if c := w.countWith(rc, func(s *receipt.Side) {
				s.Gave.Events += took
				s.Gave.Bytes += size
			}); c != nil {
				if err := w.l.db.addCount(c); err != nil {
					return permanent(err)
				}
			}
			var total int64
			w.add(func(s *Summary) {
				s.EventsServed += int64(took)
				total = s.EventsServed
			})
			w.l.progress.report("serve", total, -1)
		}
		if err != nil {
			return err
		}
		if stop || len(evs) < len(held) {
			return nil // refused, or the serve bytes are spent
		}
	}
	return nil
}
