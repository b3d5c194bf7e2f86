package leaf

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/problemreport"
	"fleetmesh.org/fleetmesh/didcomm/routing"
)

// pickup collects the mediator's queue. Each delivery is stored in one
// fsynced transaction before messages-received acknowledges it, so a
// kill -9 at any point loses nothing: an unacknowledged delivery comes
// again and its ids, already stored, drop it.
func (w *wake) pickup(c *mediation.Client) error {
	_, err := c.CollectBatches(w.ctx, int(w.l.cfg.DeliveryBatch), func(batch []mediation.Delivered) error {
		ms := make([]message, 0, len(batch))
		for _, d := range batch {
			ms = append(ms, w.l.openDelivery(c.Mediator, d))
		}
		n, err := w.l.db.putMessages(ms, c.Mediator, w.l.cfg.WindowSecs, time.Now())
		if err != nil {
			return permanent(fmt.Errorf("store picked-up messages: %w", err))
		}
		if n > 0 {
			w.counter.firstPickup.CompareAndSwap(-1, time.Since(w.start).Milliseconds())
		}
		var total int64
		w.add(func(s *Summary) {
			s.PickedUp += int64(n)
			total = s.PickedUp
		})
		w.l.progress.report("pickup", total, -1)
		return nil
	})
	return err
}

// openDelivery unpacks one delivered message. One that cannot be opened
// is kept packed with the reason: it was acknowledged, so dropping it
// would lose it.
func (l *Leaf) openDelivery(mediatorDID string, d mediation.Delivered) message {
	m := message{DeliveryID: d.ID, Mediator: mediatorDID}
	u, err := l.unpacker.Unpack(d.Packed)
	if err != nil {
		m.Packed, m.Error = json.RawMessage(d.Packed), err.Error()
		if !json.Valid(d.Packed) {
			m.Packed, _ = json.Marshal(string(d.Packed))
		}
		return m
	}
	m.ID, m.Authenticated = u.Message.ID, u.Authenticated
	if u.Authenticated {
		m.From = u.Message.From
	}
	m.Message = json.RawMessage(u.Plaintext)
	if !json.Valid(m.Message) {
		m.Message, _ = json.Marshal(u.Message)
	}
	return m
}

// flushMessages sends the outbox messages this home takes.
func (w *wake) flushMessages(h *homeState) error {
	es, err := w.l.db.outbox(outMessage)
	if err != nil {
		return permanent(err)
	}
	ex := w.exchange(h.Endpoint)
	for i, e := range es {
		if e.Via != h.DID {
			continue
		}
		out := []byte(e.Data)
		if e.To != h.DID {
			if out, err = routing.Route(w.l.packer, e.Data, e.To, h.DID); err != nil {
				return permanent(err)
			}
		}
		answer, err := ex(w.ctx, out)
		if err != nil {
			return err
		}
		reason, keep := w.l.refusal(answer)
		if err := w.l.db.settleOutbox(e, reason, keep); err != nil {
			return permanent(err)
		}
		if reason == "" {
			w.add(func(s *Summary) { s.OutboxSent++ })
		}
		w.l.progress.report("outbox", int64(i+1), int64(len(es)))
	}
	return nil
}

// refusal reads a home's answer to a sent message: "" when it was taken
// (202, or an answer that is not a problem report), else the problem code
// and whether to keep the entry for a later wake (only a full queue, a rate limit
// or an internal error is worth retrying).
func (l *Leaf) refusal(answer []byte) (reason string, keep bool) {
	if len(answer) == 0 {
		return "", false
	}
	u, err := l.unpacker.Unpack(answer)
	if err != nil {
		var p *didcomm.Problem
		if errors.As(err, &p) {
			return p.Code, false
		}
		return err.Error(), false
	}
	if u.Message.Type != problemreport.Type {
		return "", false
	}
	var b struct {
		Code    string `json:"code"`
		Comment string `json:"comment"`
	}
	_ = json.Unmarshal(u.Message.Body, &b)
	switch b.Code {
	case didcomm.CodeQueueFull, didcomm.CodeInternal, didcomm.CodeRateLimited:
		return b.Code, true
	}
	return fmt.Sprintf("%s: %s", b.Code, b.Comment), false
}
