package mesh

import (
	"context"
	"errors"
	"fmt"
	"slices"

	pubsub "github.com/libp2p/go-libp2p-pubsub"

	"fleetmesh.org/fleetmesh/nostr"
)

// A shard is subscribed while at least one reason needs it: the node's
// own filters (Subscribe), its clients' subscriptions (SetInterest) or
// durability (the placer's setDurable). Each reason is a set of shards
// under Mesh.mu; the last two are reconciled against a new wanted set the
// same way, by reconcileLocked.

// Subscribe makes the node receive the events of shards (see ShardsFor),
// handing each to the Sink. Subscribing to a shard twice is a no-op.
func (m *Mesh) Subscribe(shards ...int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range shards {
		if err := m.subscribeLocked(s); err != nil {
			return err
		}
		m.own[s] = true
	}
	return nil
}

func (m *Mesh) subscribeLocked(s int) error {
	if _, ok := m.subs[s]; ok {
		return nil
	}
	t, err := m.topicLocked(s)
	if err != nil {
		return err
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(m.cfg.SubscriptionBuffer))
	if err != nil {
		return fmt.Errorf("mesh: subscribe %s: %w", Topic(s), err)
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.subs[s] = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer sub.Cancel()
		m.deliver(ctx, sub)
	}()
	return nil
}

// Unsubscribe stops receiving the events of shards, except those the node
// holds for durability.
func (m *Mesh) Unsubscribe(shards ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range shards {
		delete(m.own, s)
		if !m.neededLocked(s) {
			m.unsubscribeLocked(s)
		}
	}
}

// neededLocked says whether anything still needs shard s: the node's own
// filters, durability or its clients' subscriptions.
func (m *Mesh) neededLocked(s int) bool {
	return m.own[s] || m.durable[s] || m.interest[s]
}

// SetInterest makes shards the set of shards the node's clients want live
// events of, on top of its own filters and durability: it joins the new
// ones and leaves those nothing else needs any more.
func (m *Mesh) SetInterest(shards []int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	for _, s := range shards {
		if s < 0 || s >= ShardCount {
			return fmt.Errorf("mesh: interest in shard %d: out of range 0 to %d", s, ShardCount-1)
		}
	}
	return m.reconcileLocked(m.interest, shards)
}

// Interested reports whether the node's clients want shard's live events
// (SetInterest).
func (m *Mesh) Interested(shard int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.interest[shard]
}

// setDurable makes shards the set held for durability: it subscribes to
// the new ones and leaves those no longer held that the node's own
// subscriptions do not need. Their events stay in the store until the
// node's hand-off (meshsync) has given them to the shards' holders.
func (m *Mesh) setDurable(shards []int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reconcileLocked(m.durable, shards)
}

// reconcileLocked makes set, one of the reasons to subscribe (m.durable,
// m.interest), hold exactly shards: it subscribes to the shards new to it
// and leaves the shards it drops that no other reason needs.
func (m *Mesh) reconcileLocked(set map[int]bool, shards []int) error {
	want := make(map[int]bool, len(shards))
	for _, s := range shards {
		want[s] = true
	}
	for s := range set {
		if !want[s] {
			delete(set, s)
			if !m.neededLocked(s) {
				m.unsubscribeLocked(s)
			}
		}
	}
	var errs []error
	for s := range want {
		set[s] = true
		errs = append(errs, m.subscribeLocked(s))
	}
	return errors.Join(errs...)
}

func (m *Mesh) unsubscribeLocked(s int) {
	if cancel, ok := m.subs[s]; ok {
		cancel()
		delete(m.subs, s)
	}
}

// Subscribed returns the subscribed shards in increasing order, for the
// node's own filters and for durability.
func (m *Mesh) Subscribed() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int, 0, len(m.subs))
	for s := range m.subs {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// deliver hands the events of one subscription to the Sink until ctx ends.
func (m *Mesh) deliver(ctx context.Context, sub *pubsub.Subscription) {
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			return
		}
		if msg.Local || msg.ReceivedFrom == m.h.ID() {
			continue // our own publication: the node already holds it
		}
		ev, ok := msg.ValidatorData.(*nostr.Event)
		if !ok {
			continue
		}
		if err := m.sink.Ingest(ctx, ev, msg.ReceivedFrom); err != nil {
			m.stats.add(func(s *Stats) { s.SinkErrors++ })
			m.log.Warn("sink refused a replicated event", "id", ev.IDHex(), "from", msg.ReceivedFrom, "err", err)
			continue
		}
		m.stats.add(func(s *Stats) { s.Delivered++ })
	}
}
