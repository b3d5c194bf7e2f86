package relay

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/negentropy"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/workbudget"
)

// negFrameLimit keeps a NEG-MSG, hex-encoded, under the 131,072-byte
// WebSocket payload that deployed relays and clients (strfry) accept.
const negFrameLimit = 60000

// negMessageType is the metric label of each NIP-77 client message.
var negMessageType = map[string]string{nostr.MsgNegOpen: "open", nostr.MsgNegMsg: "msg", nostr.MsgNegClose: "close"}

// handleNeg serves NIP-77: NEG-OPEN loads the (created_at, id) pairs of
// the events matching the filter and answers as the negentropy responder;
// NEG-MSG continues; NEG-CLOSE ends the session. Sessions count against
// the connection's subscription limit.
func (c *conn) handleNeg(m *nostr.ClientMessage) {
	negErr := func(reason string) {
		c.r.m.rejected.WithLabelValues("negentropy").Inc()
		c.negErr(m.SubID, reason)
	}
	c.r.m.negMessages.WithLabelValues(negMessageType[m.Type]).Inc()
	switch m.Type {
	case nostr.MsgNegClose:
		c.endNeg(m.SubID)
		return
	case nostr.MsgNegOpen:
		if reason := c.checkFilters(m.Filters); reason != "" {
			negErr(reason)
			return
		}
		// A NEG-OPEN reusing an open session's id replaces it.
		c.endNeg(m.SubID)
		c.mu.Lock()
		switch {
		case len(c.negs)+len(c.subs) >= c.r.cfg.MaxSubscriptions:
			c.mu.Unlock()
			negErr(fmt.Sprintf("blocked: this connection has %d open subscriptions and sync sessions, the relay's limit", c.r.cfg.MaxSubscriptions))
			return
		case len(c.negs) >= c.r.cfg.MaxNegSessions:
			c.mu.Unlock()
			negErr(fmt.Sprintf("blocked: this connection has %d open sync sessions, the relay's limit; NEG-CLOSE one first", c.r.cfg.MaxNegSessions))
			return
		}
		c.mu.Unlock()
		msg, err := hex.DecodeString(m.NegMsg)
		if err != nil {
			negErr("invalid: negentropy message is not hex")
			return
		}
		if !c.r.addrs.openNeg(c.addr) {
			negErr(fmt.Sprintf("blocked: your address has %d open sync sessions, the relay's limit; NEG-CLOSE some first", c.r.cfg.IPMaxNegSessions))
			return
		}
		// The listing is charged before it runs, as if it read every
		// record a session may cover (as far as a second of debt), and
		// settled with what it read: so NEG-OPENs from one address run
		// one at a time, each once the address's budget has room.
		res, reason := c.admitReserving(c.ctx, workbudget.Work{Rows: c.r.cfg.MaxNegRecords + 1})
		if reason != "" {
			c.r.addrs.closeNeg(c.addr)
			negErr(reason)
			return
		}
		items, used, err := c.negItems(&m.Filters[0])
		c.settleWork(res, used)
		if err != nil {
			c.r.addrs.closeNeg(c.addr)
			negErr(err.Error())
			return
		}
		vec, err := negentropy.NewVector(items)
		if err != nil {
			c.r.addrs.closeNeg(c.addr)
			negErr("error: " + err.Error())
			return
		}
		resp, err := negentropy.NewResponder(vec, negentropy.Config{FrameSizeLimit: negFrameLimit, MaxRecords: c.r.cfg.MaxNegRecords})
		if err != nil {
			c.r.addrs.closeNeg(c.addr)
			negErr("error: " + err.Error())
			return
		}
		c.mu.Lock()
		c.negs[m.SubID] = resp
		c.mu.Unlock()
		c.negStep(m.SubID, resp, msg, negErr)
	case nostr.MsgNegMsg:
		c.mu.Lock()
		resp, ok := c.negs[m.SubID]
		c.mu.Unlock()
		if !ok {
			negErr("closed: no open sync session with this id; send NEG-OPEN first")
			return
		}
		msg, err := hex.DecodeString(m.NegMsg)
		if err != nil {
			negErr("invalid: negentropy message is not hex")
			return
		}
		c.negStep(m.SubID, resp, msg, negErr)
	}
}

func (c *conn) negStep(subID string, resp *negentropy.Responder, msg []byte, negErr func(string)) {
	out, err := resp.Reconcile(msg)
	if err != nil {
		c.endNeg(subID)
		switch {
		case errors.Is(err, negentropy.ErrMalformed):
			negErr("invalid: malformed negentropy message")
		default:
			negErr("error: " + err.Error())
		}
		return
	}
	c.sendCtl(encode(nostr.RelayMessage{Type: nostr.MsgNegMsg, SubID: subID, NegMsg: hex.EncodeToString(out)}))
}

// negItems loads the (created_at, id) pairs of the events a filter
// matches, refusing filters that match more than the configured bound,
// and says what the store work cost. The store lists them in no order
// (in one pass over its records for the whole store), and only the pair
// is read from each record; no event is decoded, but one of a kind that
// needs AUTH to read, to check who may read it.
func (c *conn) negItems(f *nostr.Filter) ([]negentropy.Item, workbudget.Work, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.r.cfg.QueryTimeout.Duration)
	defer cancel()
	ctx, meter := withMeter(ctx)
	var items []negentropy.Item
	max := c.r.cfg.MaxNegRecords
	var derr error
	err := c.r.store.(rawLister).ListRaw(ctx, f, max+1, func(r eventstore.Raw) bool {
		if ok, err := c.mayRead(r); err != nil || !ok {
			derr = err
			return err == nil
		}
		items = append(items, negentropy.Item{Timestamp: uint64(r.CreatedAt()), ID: r.ID()})
		return true
	})
	if err := cmp.Or(err, derr); err != nil {
		return nil, meter.work(), errors.New("error: could not read the events to sync; try again")
	}
	if len(items) > max {
		return nil, meter.work(), fmt.Errorf("blocked: this filter matches more than %d events; narrow it (since/until, authors, kinds)", max)
	}
	return items, meter.work(), nil
}

// endNeg ends the sync session id, if open, and gives back its slot in
// the address's count.
func (c *conn) endNeg(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.negs[id]; ok {
		delete(c.negs, id)
		c.r.addrs.closeNeg(c.addr)
	}
}
