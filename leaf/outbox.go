package leaf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
)

// outboxEvents reads the outbox's events once for the wake, so every home
// is sent the same entries. A damaged entry (it cannot come from Publish,
// which checked it) is moved to the rejected list.
func (w *wake) outboxEvents() ([]*nostr.Event, []outboxEntry, error) {
	es, err := w.l.db.outbox(outEvent)
	if err != nil || len(es) == 0 {
		return nil, nil, err
	}
	evs := make([]*nostr.Event, 0, len(es))
	kept := es[:0]
	for _, e := range es {
		ev := new(nostr.Event)
		if err := json.Unmarshal(e.Data, ev); err != nil {
			if err := w.l.db.settleOutbox(e, "invalid: stored event does not parse: "+err.Error(), false); err != nil {
				return nil, nil, err
			}
			continue
		}
		evs, kept = append(evs, ev), append(kept, e)
	}
	return evs, kept, nil
}

// outboxTo sends the outbox events to home i, each until that home has
// answered it, while the home is reachable and the wake lasts. Every home
// that answers gets every entry, so what the user wrote is on each of
// them; an entry leaves the outbox at the first OK true (spec/leaf.md
// "More than one home").
func (w *wake) outboxTo(i int, evs []*nostr.Event, es []outboxEntry) {
	answered := make([]bool, len(evs))
	done := 0
	err := w.retryHome(i, func() error {
		rc, err := w.relays.get(i)
		if err != nil {
			return err
		}
		var idx []int
		for j := range evs {
			if !answered[j] {
				idx = append(idx, j)
			}
		}
		batch := make([]*nostr.Event, len(idx))
		for k, j := range idx {
			batch[k] = evs[j]
		}
		err = rc.publish(batch, publishWindow, func(k int, ok bool, reason string) error {
			j := idx[k]
			answered[j] = true
			done++
			w.l.progress.report("outbox", int64(done), int64(len(evs)))
			return w.settleEvent(rc, es[j], evs[j], ok, reason)
		})
		if err != nil {
			var p permanentError
			if !errors.As(err, &p) {
				w.relays.drop(rc)
			}
		}
		return err
	})
	if err != nil {
		w.fail(fmt.Errorf("leaf: outbox to %s: %w", w.st.Homes[i].DID, err))
	}
}

// settleEvent records a home's OK to an outbox event: OK true removes
// the entry (counted as an event and its bytes given to that home on a
// metered connection, as the home counts what it accepted); a duplicate
// the home refused (a newer replaceable) removes it too; a permanent
// refusal moves it to Rejected() unless another home has taken it; any
// other refusal keeps it for a later wake.
func (w *wake) settleEvent(rc *relayConn, e outboxEntry, ev *nostr.Event, ok bool, reason string) error {
	var err error
	switch {
	case ok:
		size := uint64(len(ev.AppendJSON(nil)))
		var first bool
		first, err = w.l.db.acceptOutbox(e, w.countWith(rc, func(s *receipt.Side) {
			s.Gave.Events++
			s.Gave.Bytes += size
		}))
		if first {
			w.add(func(s *Summary) { s.OutboxSent++ })
		}
	case strings.HasPrefix(reason, "duplicate:"):
		var first bool
		if first, err = w.l.db.acceptOutbox(e, nil); first {
			w.add(func(s *Summary) { s.OutboxSent++ })
		}
	case permanentRefusal(reason):
		err = w.l.db.settleOutbox(e, reason, false)
	default:
		err = w.l.db.settleOutbox(e, reason, true)
	}
	if err != nil {
		return permanent(err)
	}
	return nil
}

// countWith is an addition to the leaf's figures with rc's home, made now,
// or nil when rc is not metered (the home counts nothing on it either).
func (w *wake) countWith(rc *relayConn, fn func(*receipt.Side)) *countAdd {
	if !rc.metered {
		return nil
	}
	return &countAdd{home: rc.home, secs: w.l.cfg.WindowSecs, at: time.Now(), fn: fn}
}

// permanentRefusal: an OK false that sending again cannot change.
func permanentRefusal(reason string) bool {
	for _, p := range []string{"invalid:", "blocked:", "pow:", "restricted:"} {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}
