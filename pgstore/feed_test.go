package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/internal/pgtest"
	"fleetmesh.org/fleetmesh/nostr"
)

// writeAll saves events through the stores, round robin, from one
// goroutine per store, retrying a save that fails (its connection killed)
// until ctx ends. It returns the ids each save reported Stored or, on a
// retry of one that committed before its connection died, Duplicate.
func writeAll(ctx context.Context, t *testing.T, stores []*Store, evs []*nostr.Event, retry bool) map[[32]byte]bool {
	t.Helper()
	var (
		mu     sync.Mutex
		stored = map[[32]byte]bool{}
		wg     sync.WaitGroup
	)
	errs := make(chan error, len(stores))
	for w, s := range stores {
		wg.Go(func() {
			for i := w; i < len(evs); i += len(stores) {
				for {
					r, err := s.Save(ctx, evs[i])
					if err != nil && retry && ctx.Err() == nil {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					if r == eventstore.Stored || (retry && r == eventstore.Duplicate) {
						mu.Lock()
						stored[evs[i].ID] = true
						mu.Unlock()
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return stored
}

// drain reads f until it has delivered the change numbered head, and
// checks that it delivered after+1, after+2, ..., head, each once.
func drain(ctx context.Context, t *testing.T, f *Follower, after, head uint64) []Change {
	t.Helper()
	var got []Change
	next := after + 1
	for next <= head {
		select {
		case c, ok := <-f.C():
			if !ok {
				t.Fatalf("follower stopped at %d of %d: %v", next-1, head, f.Err())
			}
			if c.Seq != next {
				t.Fatalf("follower delivered change %d after %d: a gap or a repeat", c.Seq, next-1)
			}
			got = append(got, c)
			next++
		case <-ctx.Done():
			t.Fatalf("follower reached %d of %d before the deadline", next-1, head)
		}
	}
	return got
}

func makeNotes(fx *fixture, n int) []*nostr.Event {
	var evs []*nostr.Event
	for i := range n {
		evs = append(evs, fx.event(i%len(fx.keys), 1, fx.now.Load()-int64(i%50), nostr.Tags{{"t", "feed"}}, fmt.Sprint("note ", i)))
	}
	return evs
}

// TestFeedOrder writes through four stores at once (replaceable events
// among them, so that replacements add removals) while a fifth follows the
// feed: the follower gets 1..head with no gap and no repeat, exactly the
// events saved as Stored appear as stored changes, and replaying the feed
// gives exactly the events the store serves.
func TestFeedOrder(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stores := fx.openMany(4)
	f := fx.s.Follow(ctx, 0)
	evs := makeNotes(fx, 200)
	for i := range 60 {
		evs = append(evs, fx.event(i%4, 10002, fx.now.Load()-int64(i%13), nil, fmt.Sprint("relays ", i)))
	}
	stored := writeAll(ctx, t, stores, evs, false)
	head, err := fx.s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs := drain(ctx, t, f, 0, head)
	live := map[[32]byte]bool{}
	storedChanges := 0
	for _, c := range cs {
		switch c.Op {
		case OpStored:
			storedChanges++
			if !stored[c.ID] {
				t.Fatalf("change %d stores %x, which no save reported stored", c.Seq, c.ID[:4])
			}
			live[c.ID] = true
		case OpRemoved:
			if !live[c.ID] {
				t.Fatalf("change %d removes %x, which the feed had not stored", c.Seq, c.ID[:4])
			}
			delete(live, c.ID)
		}
	}
	if storedChanges != len(stored) {
		t.Fatalf("%d stored changes for %d saves reported stored", storedChanges, len(stored))
	}
	served := queryAll(t, fx.s, nostr.Filter{Kinds: []int{1, 10002}}, 10_000)
	if len(served) != len(live) {
		t.Fatalf("the store serves %d events, the feed replayed leaves %d", len(served), len(live))
	}
	for _, e := range served {
		if !live[e.ID] {
			t.Fatalf("the store serves %x, which the replayed feed does not hold", e.ID[:4])
		}
	}
	// Changes agrees with what the follower delivered.
	again, err := fx.s.Changes(ctx, 10, 5)
	if err != nil || len(again) != 5 || again[0].Seq != 11 || again[0].ID != cs[10].ID {
		t.Fatalf("Changes(10, 5): %d changes from %v (err %v)", len(again), again, err)
	}
}

// TestStoredThenLive opens a "REQ" (QueryRawHead, then Follow from its
// head) in the middle of concurrent writes: its stored part and its live
// part together hold every matching event exactly once.
func TestStoredThenLive(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stores := fx.openMany(3)
	evs := makeNotes(fx, 250)
	done := make(chan map[[32]byte]bool)
	go func() { done <- writeAll(ctx, t, stores, evs, false) }()
	storedThenLive(ctx, t, fx.s, nostr.Filter{Kinds: []int{1}, Tags: map[string][]string{"t": {"feed"}}}, 50, done)
}

// storedThenLive opens a "REQ" for f on s once the feed's head has
// reached from (or a minute has passed) while the writes that done
// reports go on: QueryRawHead, then Follow from its head to the head
// after the writes. The stored part and the live part together must
// hold every event the writes stored exactly once, and nothing else.
func storedThenLive(ctx context.Context, t *testing.T, s *Store, f nostr.Filter, from uint64, done <-chan map[[32]byte]bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		h, err := s.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h >= from || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	seen := map[[32]byte]int{}
	head, err := s.QueryRawHead(ctx, &f, 10_000, func(r eventstore.Raw) bool {
		seen[r.ID()]++
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	follower := s.Follow(ctx, head)
	stored := <-done
	final, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stored part: %d events at head %d; live part: %d changes", len(seen), head, final-head)
	for _, c := range drain(ctx, t, follower, head, final) {
		if c.Op == OpStored {
			seen[c.ID]++
		}
	}
	if len(seen) != len(stored) {
		t.Fatalf("the REQ saw %d events of %d", len(seen), len(stored))
	}
	for id, n := range seen {
		if n != 1 || !stored[id] {
			t.Fatalf("event %x seen %d times (stored: %v)", id[:4], n, stored[id])
		}
	}
}

// TestFeedResume kills every connection to the database, over and over,
// while four stores write and a fifth follows the feed: the writers retry,
// the follower reads on from the last change it delivered, and it gets
// every change once, with no gap.
func TestFeedResume(t *testing.T) {
	t.Parallel()
	fx := newFixtureWith(t, 4, Options{FeedPoll: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stores := fx.openMany(4)
	f := fx.s.Follow(ctx, 0)
	evs := makeNotes(fx, 200)
	done := make(chan map[[32]byte]bool)
	go func() { done <- writeAll(ctx, t, stores, evs, true) }()
	kills, terminated := 0, 0
	var stored map[[32]byte]bool
	for stored == nil {
		select {
		case stored = <-done:
		case <-time.After(50 * time.Millisecond):
			n, err := pgtest.Terminate(ctx, fx.url)
			if err != nil {
				t.Fatal(err)
			}
			kills++
			terminated += n
		}
	}
	if terminated == 0 {
		t.Fatal("no connection was terminated")
	}
	head, err := fx.s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rounds of pg_terminate_backend ended %d connections; head %d", kills, terminated, head)
	got := map[[32]byte]bool{}
	for _, c := range drain(ctx, t, f, 0, head) {
		if c.Op == OpStored {
			got[c.ID] = true
		}
	}
	if len(got) != len(evs) || len(stored) != len(evs) {
		t.Fatalf("the feed stored %d events, the writers %d, of %d", len(got), len(stored), len(evs))
	}
	// A query and a save right after a kill succeed: the store drops the
	// dead connections it finds and dials anew.
	if _, err := pgtest.Terminate(ctx, fx.url); err != nil {
		t.Fatal(err)
	}
	if got := fx.query(nostr.Filter{IDs: [][32]byte{evs[0].ID}}, 1); len(got) != 1 {
		t.Fatalf("query right after a kill: %d events, want 1", len(got))
	}
	// The follower is still live after the last kill: a new event reaches it.
	e := fx.event(0, 1, fx.now.Load(), nil, "after the kills")
	if r := fx.save(e); r != eventstore.Stored {
		t.Fatalf("save after the kills: %v", r)
	}
	if cs := drain(ctx, t, f, head, head+1); cs[0].ID != e.ID {
		t.Fatalf("the change after the kills is %x, want %x", cs[0].ID[:4], e.ID[:4])
	}
}

// TestFeedTruncated: a reader behind the changes the feed keeps is told
// so, and a follower stops with ErrFeedTruncated.
func TestFeedTruncated(t *testing.T) {
	t.Parallel()
	fx := newFixtureWith(t, 1, Options{FeedKeep: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, e := range makeNotes(fx, 6) {
		fx.save(e)
	}
	if err := fx.s.pruneFeed(ctx); err != nil {
		t.Fatal(err)
	}
	if cs, err := fx.s.Changes(ctx, 3, 10); err != nil || len(cs) != 3 || cs[0].Seq != 4 {
		t.Fatalf("Changes(3): %v (err %v), want 4..6", cs, err)
	}
	if _, err := fx.s.Changes(ctx, 1, 10); !errors.Is(err, ErrFeedTruncated) {
		t.Fatalf("Changes(1) after pruning to 4..6: %v, want ErrFeedTruncated", err)
	}
	f := fx.s.Follow(ctx, 0)
	for range f.C() {
		t.Fatal("a truncated follower delivered a change")
	}
	if !errors.Is(f.Err(), ErrFeedTruncated) {
		t.Fatalf("follower stopped with %v, want ErrFeedTruncated", f.Err())
	}
}

// TestFeedNotifyWakes sets the poll floor to ten minutes, so that only a
// NOTIFY can wake the follower within the test's deadline: a change
// reaches it, and so does one saved after every connection was killed
// (the listener connects again and LISTENs anew).
func TestFeedNotifyWakes(t *testing.T) {
	t.Parallel()
	fx := newFixtureWith(t, 1, Options{FeedPoll: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writer := fx.open()
	defer writer.Close()
	f := fx.s.Follow(ctx, 0)
	// The follower's first read may come before the listener listens;
	// the listener wakes it once it does, so the save below is seen
	// whichever comes first.
	e1 := fx.event(0, 1, fx.now.Load(), nil, "first")
	if r, err := writer.Save(ctx, e1); err != nil || r != eventstore.Stored {
		t.Fatalf("save: %v %v", r, err)
	}
	if cs := drain(ctx, t, f, 0, 1); cs[0].ID != e1.ID {
		t.Fatalf("first change: %x", cs[0].ID[:4])
	}
	if _, err := pgtest.Terminate(ctx, fx.url); err != nil {
		t.Fatal(err)
	}
	e2 := fx.event(0, 1, fx.now.Load(), nil, "after the kill")
	for {
		r, err := writer.Save(ctx, e2)
		if err == nil && (r == eventstore.Stored || r == eventstore.Duplicate) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("save after the kill: %v", err)
		}
	}
	if cs := drain(ctx, t, f, 1, 2); cs[0].ID != e2.ID {
		t.Fatalf("second change: %x", cs[0].ID[:4])
	}
}

// TestFeedPollWhileListening: while the listener is connected, a
// follower reads the feed on notifications only, and waits
// FeedPollListening, not FeedPoll, for anything else; a change appended
// without NOTIFY (by hand, in SQL) is read when the listener's connection
// drops and comes back, which wakes every follower. Idle front-ends spend
// most of their CPU on these polls (docs/benchmarks/scale-out.md).
func TestFeedPollWhileListening(t *testing.T) {
	t.Parallel()
	fx := newFixtureWith(t, 1, Options{FeedPoll: 50 * time.Millisecond, FeedPollListening: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := fx.s.Follow(ctx, 0)
	within := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not within the test's deadline", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	within("the listener connected", fx.s.listening.Load)
	if got := fx.s.pollEvery(); got != time.Hour {
		t.Fatalf("poll while listening: %v, want FeedPollListening", got)
	}
	e1 := fx.event(0, 1, fx.now.Load(), nil, "notified")
	fx.save(e1)
	if cs := drain(ctx, t, f, 0, 1); cs[0].ID != e1.ID {
		t.Fatalf("first change: %x", cs[0].ID[:4])
	}
	// Appended by hand, with no NOTIFY: FeedPoll would read it within
	// 50 ms; while the listener is connected nothing does.
	quiet := fx.event(0, 20001, fx.now.Load(), nil, "no notify")
	if _, err := fx.s.pool.Exec(ctx, appendSQL, 1, []int16{int16(OpEphemeral)}, [][]byte{quiet.ID[:]}, [][]byte{quiet.AppendJSON(nil)}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-f.C():
		t.Fatalf("a change appended without NOTIFY was read within a second while listening (seq %d)", c.Seq)
	case <-time.After(time.Second):
	}
	// The listener's connection ends: it wakes the followers, which
	// read the change.
	if _, err := pgtest.Terminate(ctx, fx.url); err != nil {
		t.Fatal(err)
	}
	if cs := drain(ctx, t, f, 1, 2); cs[0].ID != quiet.ID {
		t.Fatalf("the change after the listener's reconnection: %x", cs[0].ID[:4])
	}
}
