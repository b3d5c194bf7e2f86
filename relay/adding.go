package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// frameOverhead is the length of `["EVENT",]` around an event.
const frameOverhead = 10

// handleEvent runs the cheap checks in the read loop, so that rate limits
// apply in arrival order, then verifies and saves in a goroutine bounded by
// MaxInFlight, so a client that pipelines EVENTs is not serialized on fsync.
func (c *conn) handleEvent(ev *nostr.Event, frameLen int) {
	id := ev.ID
	reject := func(metric, msg string) {
		c.r.m.rejected.WithLabelValues(metric).Inc()
		c.ok(id, false, msg)
	}
	if c.limiter != nil && !c.limiter.Allow() {
		reject("rate_conn", fmt.Sprintf("rate-limited: slow down, this relay takes %g events per second per connection", c.r.cfg.EventsPerSecond))
		return
	}
	if !c.r.addrs.allowEvent(c.addr) {
		reject("rate_ip", fmt.Sprintf("rate-limited: slow down, this relay takes %g events per second from one address", c.r.cfg.IPEventsPerSecond))
		return
	}
	if size := frameLen - frameOverhead; size > c.r.cfg.MaxEventBytes {
		reject("event_too_large", fmt.Sprintf("invalid: event of %d bytes is over this relay's limit of %d bytes", size, c.r.cfg.MaxEventBytes))
		return
	}
	select {
	case c.inflight <- struct{}{}:
	case <-c.ctx.Done():
		return
	}
	c.handlers.Add(1)
	go func() {
		defer func() {
			<-c.inflight
			c.handlers.Done()
		}()
		// Saving uses a context that the client leaving does not cancel:
		// an event being saved is finished and kept.
		accepted, msg := c.admit(context.WithoutCancel(c.ctx), ev)
		// Counted before the OK leaves, so a client that has its OK
		// finds it counted.
		if accepted && c.party != "" && c.r.Served != nil {
			c.r.Served(c.party, false, frameLen-frameOverhead)
		}
		c.ok(id, accepted, msg)
	}()
}

// admit checks an event against the protocol and the relay's policy and
// stores it; it returns the OK answer.
func (c *conn) admit(ctx context.Context, ev *nostr.Event) (bool, string) {
	r := c.r
	reject := func(metric, msg string) (bool, string) {
		r.m.rejected.WithLabelValues(metric).Inc()
		return false, msg
	}
	cfg := &r.cfg
	switch {
	case len(ev.Tags) > cfg.MaxTags:
		return reject("too_many_tags", fmt.Sprintf("invalid: event has %d tags, over this relay's limit of %d", len(ev.Tags), cfg.MaxTags))
	case len(ev.Content) > cfg.MaxContentBytes:
		return reject("content_too_large", fmt.Sprintf("invalid: content of %d bytes is over this relay's limit of %d bytes", len(ev.Content), cfg.MaxContentBytes))
	case ev.CreatedAt > r.now().Unix()+cfg.MaxFutureSeconds:
		return reject("future", fmt.Sprintf("invalid: created_at is more than %d seconds in the future; check the device clock", cfg.MaxFutureSeconds))
	case !ev.ValidUTF8():
		return reject("utf8", "invalid: event contains invalid UTF-8")
	case ev.Kind == nostr.KindClientAuth:
		return reject("auth_as_event", "invalid: NIP-42 auth events (kind 22242) are sent with AUTH, not EVENT, and are never stored")
	}
	if err := c.r.verifier.Verify(ev); err != nil {
		if errors.Is(err, nostr.ErrBadID) {
			return reject("bad_id", "invalid: event id does not match the sha256 of its serialization")
		}
		return reject("bad_sig", "invalid: signature does not verify against the pubkey")
	}
	if ev.Protected() && !c.isAuthed(ev.PubKey) {
		if c.anyAuthed() {
			return reject("protected", "restricted: this event is protected (NIP-70); only its author may publish it")
		}
		return reject("protected", "auth-required: this event is protected (NIP-70); authenticate as its author first")
	}
	if slices.Contains(cfg.AuthRequiredKinds, ev.Kind) && !c.anyAuthed() {
		return reject("auth_required", fmt.Sprintf("auth-required: kind %d needs NIP-42 authentication on this relay", ev.Kind))
	}
	if reason := r.refuse(ctx, ev); reason != "" {
		return false, reason
	}
	res, err := r.accept(ctx, ev, FromClient)
	if err != nil {
		return false, r.saveFailed(ev, err)
	}
	switch res {
	case eventstore.Stored:
		return true, ""
	case eventstore.Duplicate:
		return true, "duplicate: already have this event"
	case eventstore.Superseded:
		return false, "duplicate: a newer version of this replaceable event is already stored"
	case eventstore.Deleted:
		return false, "blocked: this event was deleted by its author"
	case eventstore.Expired:
		return false, "invalid: this event has expired (NIP-40)"
	}
	return false, "error: unexpected store result " + res.String()
}

func (c *conn) isAuthed(pk [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.authed[pk]
	return ok
}

func (c *conn) anyAuthed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.authed) > 0
}

// saveFailed is the OK message for a save the store could not make. A full
// store says so (its bound or its disk, in its own words) and is logged at
// WARN, since it refuses every write until space returns; anything else
// is an ERROR here and a plain retry for the client.
func (r *Relay) saveFailed(ev *nostr.Event, err error) string {
	switch {
	case errors.Is(err, eventstore.ErrFull):
		r.log.Warn("relay: store full; refusing writes", "id", ev.IDHex(), "err", err)
		return "error: " + strings.TrimPrefix(err.Error(), "store: ") + "; try again later"
	case errors.Is(err, eventstore.ErrWritesStopped):
		r.log.Error("relay: save failed", "id", ev.IDHex(), "err", err)
		return "error: the store cannot write just now (a disk error or a full disk); try again later"
	}
	r.log.Error("relay: save failed", "id", ev.IDHex(), "err", err)
	return "error: could not save the event; try again"
}
