package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// checkFilters applies the per-REQ limits; it returns a CLOSED reason.
func (c *conn) checkFilters(filters []nostr.Filter) string {
	cfg := &c.r.cfg
	if len(filters) > cfg.MaxFilters {
		c.r.m.rejected.WithLabelValues("too_many_filters").Inc()
		return fmt.Sprintf("invalid: %d filters is over this relay's limit of %d per request", len(filters), cfg.MaxFilters)
	}
	if len(cfg.AuthRequiredKinds) > 0 && !c.anyAuthed() {
		for _, f := range filters {
			for _, k := range f.Kinds {
				if slices.Contains(cfg.AuthRequiredKinds, k) {
					c.r.m.rejected.WithLabelValues("auth_required").Inc()
					return fmt.Sprintf("auth-required: reading kind %d needs NIP-42 authentication on this relay", k)
				}
			}
		}
	}
	return ""
}

func (c *conn) limitOf(f *nostr.Filter) int {
	if !f.HasLimit {
		return c.r.cfg.DefaultLimit
	}
	return min(f.Limit, c.r.cfg.MaxLimit)
}

// handleReq registers a subscription for live events, then answers it from
// the store and ends the stored part with EOSE. Registering first means no
// event saved while the query runs is missed (it may arrive twice).
func (c *conn) handleReq(m *nostr.ClientMessage) {
	if reason := c.checkFilters(m.Filters); reason != "" {
		c.closed(m.SubID, reason)
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	if old, ok := c.subs[m.SubID]; ok {
		old.end()
		delete(c.subs, m.SubID)
		c.r.m.subs.Dec()
	}
	if len(c.subs) >= c.r.cfg.MaxSubscriptions {
		c.mu.Unlock()
		cancel()
		c.refuseSub(m.SubID, "too_many_subs", c.r.refusals.subsConn)
		return
	}
	if !c.r.addrs.openSub(c.addr) {
		c.mu.Unlock()
		cancel()
		c.refuseSub(m.SubID, "too_many_subs_ip", c.r.refusals.subsAddr)
		return
	}
	s := &subscription{filters: m.Filters, cancel: cancel, unslot: func() { c.r.addrs.closeSub(c.addr) }, opened: c.r.fanout.opened()}
	if c.r.Interest != nil {
		s.release = c.r.Interest(m.Filters)
	}
	c.subs[m.SubID] = s
	c.mu.Unlock()
	c.r.m.subs.Inc()

	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		if reason := c.admitWork(ctx); reason != "" {
			c.dropSub(m.SubID, s)
			c.closed(m.SubID, reason)
			return
		}
		ctx, meter := withMeter(ctx)
		defer c.charge(meter)
		cut := new(atomic.Bool)
		ctx = context.WithValue(ctx, bufferCutKey{}, cut)
		start := time.Now()
		seen := make(map[[32]byte]struct{})
		heads, exact := make([]uint64, len(m.Filters)), c.r.FeedHead != nil
		for i := range m.Filters {
			f := &m.Filters[i]
			var err error
			var known bool
			if c.r.Lookup != nil && c.limitOf(f) > 0 {
				heads[i], known, err = c.answerWithLookup(ctx, m.SubID, s, f, seen)
			} else {
				qctx, qcancel := context.WithTimeout(ctx, c.r.cfg.QueryTimeout.Duration)
				heads[i], known, err = c.queryStored(qctx, f, c.limitOf(f), func(id [32]byte, _ int64, appendJSON func([]byte) []byte) bool {
					if _, dup := seen[id]; dup {
						return true
					}
					seen[id] = struct{}{}
					if !c.claim(s, id) {
						return true
					}
					c.r.m.sent.Inc()
					return c.sendEvent(ctx, m.SubID, eventFrame(m.SubID, appendJSON))
				})
				qcancel()
			}
			if ctx.Err() != nil {
				return
			}
			if cut.Load() {
				c.dropSub(m.SubID, s)
				c.closed(m.SubID, "rate-limited: this relay's send buffers are full and this connection is reading slowly; read faster or retry later")
				return
			}
			if err != nil {
				c.r.log.Warn("relay: query failed", "err", err)
			}
			exact = exact && known // not known after an error
		}
		c.r.m.reqSeconds.Observe(time.Since(start).Seconds())
		late := c.storedDone(s, c.r.eosePosition(ctx), heads, exact)
		if !c.sendAnswer(ctx, encode(nostr.RelayMessage{Type: nostr.MsgEOSE, SubID: m.SubID})) {
			return
		}
		for _, ev := range late {
			if c.canRead(ev) {
				c.r.m.sent.Inc()
				c.sendLive(m.SubID, eventFrame(m.SubID, ev.AppendJSON))
			}
		}
	}()
}

// eosePosition is the delivery position a stored answer ending now has
// read up to: the feed's head with a shared store (Relay.FeedHead), else
// the number of the last event queued. Asking the feed failing, it is
// the largest position, so the answer is remembered for the
// subscription's life rather than an event sent twice.
func (r *Relay) eosePosition(ctx context.Context) uint64 {
	if r.FeedHead == nil {
		return r.fanout.position()
	}
	head, err := r.FeedHead(ctx)
	if err != nil {
		r.log.Warn("relay: feed head", "err", err)
		return ^uint64(0)
	}
	return head
}

// rawQuerier is the optional part of a Store that hands out matches as
// they are stored (store.Store does): a REQ then writes each event's JSON
// straight from its stored record, with no nostr.Event in between.
type rawQuerier interface {
	QueryRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error
}

// rawHeadQuerier is the optional part of a shared store (pgstore's) that
// answers a query with the feed's position in the same snapshot.
type rawHeadQuerier interface {
	QueryRawHead(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) (uint64, error)
}

// queryStored calls fn with each stored event that matches f and that this
// connection may read, newest first, at most limit: its id, created_at and
// a function appending its JSON (valid only during the call). With a
// feed and a store that can say (rawHeadQuerier), it returns the feed's
// position the answer was read at, and known.
func (c *conn) queryStored(ctx context.Context, f *nostr.Filter, limit int, fn func(id [32]byte, createdAt int64, appendJSON func([]byte) []byte) bool) (head uint64, known bool, err error) {
	var derr error
	each := func(r eventstore.Raw) bool {
		ok, err := c.mayRead(r)
		if err != nil {
			derr = err
			return false
		}
		return !ok || fn(r.ID(), r.CreatedAt(), r.AppendJSON)
	}
	if hq, ok := c.r.store.(rawHeadQuerier); ok && c.r.FeedHead != nil {
		head, err := hq.QueryRawHead(ctx, f, limit, each)
		if !errors.Is(err, errNoHead) {
			return head, err == nil && derr == nil, cmp.Or(err, derr)
		}
	}
	if rq, ok := c.r.store.(rawQuerier); ok {
		err := rq.QueryRaw(ctx, f, limit, each)
		return 0, false, cmp.Or(err, derr)
	}
	return 0, false, c.r.store.Query(ctx, f, limit, func(ev *nostr.Event) bool {
		if !c.canRead(ev) {
			return true
		}
		return fn(ev.ID, ev.CreatedAt, ev.AppendJSON)
	})
}

// mayRead says whether this connection may read the stored event r: only
// a restricted kind (auth_required_kinds) needs the event decoded to see
// who it names.
func (c *conn) mayRead(r eventstore.Raw) (bool, error) {
	if !c.restrictedKind(r.Kind()) {
		return true, nil
	}
	ev, err := r.Event()
	if err != nil {
		return false, err
	}
	return c.canRead(ev), nil
}

// eventFrame encodes ["EVENT",subID,event] with the event's JSON from
// appendJSON, in one allocation sized for a typical event.
func eventFrame(subID string, appendJSON func([]byte) []byte) []byte {
	return nostr.AppendEventMessage(make([]byte, 0, 1024+len(subID)), subID, appendJSON)
}

// handleCount answers NIP-45 COUNT. One filter is counted by the store;
// several are counted by walking them so an event matching two filters is
// counted once.
func (c *conn) handleCount(m *nostr.ClientMessage) {
	if reason := c.checkFilters(m.Filters); reason != "" {
		c.closed(m.SubID, reason)
		return
	}
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		if reason := c.admitWork(c.ctx); reason != "" {
			c.closed(m.SubID, reason)
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.r.cfg.QueryTimeout.Duration)
		defer cancel()
		ctx, meter := withMeter(ctx)
		defer c.charge(meter)
		var n int64
		var approx bool
		var err error
		if len(m.Filters) == 1 && len(c.r.cfg.AuthRequiredKinds) == 0 {
			n, approx, err = c.r.store.Count(ctx, &m.Filters[0])
		} else {
			seen := make(map[[32]byte]struct{})
			rows := 0
			for i := range m.Filters {
				// A walk is bounded by MaxCountRows; a count cut short
				// by it is approximate.
				err = c.r.store.Query(ctx, &m.Filters[i], c.r.cfg.MaxCountRows, func(ev *nostr.Event) bool {
					if c.canRead(ev) {
						seen[ev.ID] = struct{}{}
					}
					rows++
					if rows >= c.r.cfg.MaxCountRows {
						approx = true
						return false
					}
					return true
				})
				if approx {
					break
				}
				if err != nil {
					break
				}
			}
			n = int64(len(seen))
		}
		if err != nil {
			c.closed(m.SubID, "error: count failed; try again")
			return
		}
		c.sendCtl(encode(nostr.RelayMessage{Type: nostr.MsgCount, SubID: m.SubID, Count: n, Approximate: approx}))
	}()
}

// deliver sends a new event, queued for delivery as seq at feed position
// pos, to each of this connection's subscriptions it matches that were
// open when it was queued and whose stored answer did not have it.
// evJSON caches the event's encoding across connections.
func (c *conn) deliver(ev *nostr.Event, seq, pos uint64, evJSON *[]byte) {
	c.mu.Lock()
	var matched []string
	for id, s := range c.subs {
		if s.eosed && s.absorbed != nil && pos != 0 && pos > s.trimAt {
			s.absorbed = nil
		}
		if _, own := s.absorbed[ev.ID]; own {
			continue
		}
		if s.opened < seq && nostr.MatchesAny(s.filters, ev) {
			if s.eosed && !s.fresh(ev, pos) {
				continue
			}
			if !s.eosed && pos != 0 && c.r.FeedHead != nil && len(s.pending) < maxPendingLive {
				s.pending = append(s.pending, pendingLive{ev, pos})
				continue
			}
			if !s.eosed {
				if s.live == nil {
					s.live = make(map[[32]byte]struct{})
				}
				s.live[ev.ID] = struct{}{}
			}
			matched = append(matched, id)
		}
	}
	c.mu.Unlock()
	if len(matched) == 0 || !c.canRead(ev) {
		return
	}
	if *evJSON == nil {
		*evJSON = ev.AppendJSON(nil)
	}
	c.r.m.sent.Add(float64(len(matched)))
	appendEvent := func(b []byte) []byte { return append(b, *evJSON...) }
	for _, id := range matched {
		c.sendLive(id, nostr.AppendEventMessage(make([]byte, 0, len(*evJSON)+len(id)+16), id, appendEvent))
	}
}

// dropSub ends subscription s under id, if it is still the one there.
func (c *conn) dropSub(id string, s *subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[id] == s {
		s.end()
		delete(c.subs, id)
		c.r.m.subs.Dec()
	}
}
