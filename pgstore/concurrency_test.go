package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/internal/pgtest"
	"fleetmesh.org/fleetmesh/nostr"
)

// TestOneWinnerAcrossProcesses saves many versions of one replaceable
// slot and one addressable slot at once through four stores, each with
// its own connections as four front-ends would have, and checks that
// every store then serves exactly one version of each slot, the newest
// (ties: lowest id), and that a deletion request racing the event it
// names never leaves that event stored.
func TestOneWinnerAcrossProcesses(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 2)
	stores := append([]*Store{fx.s}, fx.openMany(3)...)
	base := fx.now.Load() - 1000
	var versions []*nostr.Event
	for i := range 60 {
		// Few distinct times, so that ties are common.
		ts := base + int64(i%7)
		versions = append(versions, fx.event(0, 10002, ts, nil, fmt.Sprint("r", i)))
		versions = append(versions, fx.event(0, 30023, ts, nostr.Tags{{"d", "one"}}, fmt.Sprint("a", i)))
	}
	// Pairs of (a note, its author's deletion of it), to be saved at once.
	var notes, dels []*nostr.Event
	for i := range 40 {
		n := fx.event(1, 1, base, nil, fmt.Sprint("n", i))
		notes = append(notes, n)
		dels = append(dels, fx.event(1, 5, base+1, nostr.Tags{{"e", n.IDHex()}}, ""))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(versions)+2*len(notes))
	for i, e := range versions {
		wg.Go(func() {
			if _, err := stores[i%len(stores)].Save(ctx, e); err != nil {
				errs <- err
			}
		})
	}
	for i := range notes {
		wg.Go(func() {
			if _, err := stores[i%len(stores)].Save(ctx, notes[i]); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			if _, err := stores[(i+1)%len(stores)].Save(ctx, dels[i]); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	winner := func(kind int) *nostr.Event {
		var vs []*nostr.Event
		for _, v := range versions {
			if v.Kind == kind {
				vs = append(vs, v)
			}
		}
		return slices.MinFunc(vs, newestFirst)
	}
	for i, s := range stores {
		for _, kind := range []int{10002, 30023} {
			got := queryAll(t, s, nostr.Filter{Authors: [][32]byte{fx.keys[0].PubKey()}, Kinds: []int{kind}}, 100)
			if want := winner(kind); len(got) != 1 || got[0].ID != want.ID {
				t.Fatalf("store %d, kind %d: %v, want only %v", i, kind, ids(got), ids([]*nostr.Event{want}))
			}
		}
		if got := queryAll(t, s, nostr.Filter{Authors: [][32]byte{fx.keys[1].PubKey()}, Kinds: []int{1}}, 100); len(got) != 0 {
			t.Fatalf("store %d: %d deleted notes stored: %v", i, len(got), ids(got))
		}
	}
	// Every deleted note offered again is refused.
	for _, n := range notes[:5] {
		if r := fx.save(n); r != eventstore.Deleted {
			t.Fatalf("deleted note offered again: %v", r)
		}
	}
}

// TestMigrateOnce starts many stores on one fresh database at once: all
// open, and the migrations are applied once in all.
func TestMigrateOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied int
	)
	errs := make(chan error, 2*n)
	for range n {
		wg.Go(func() {
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			defer pool.Close()
			a, err := migrate(ctx, pool)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			applied += a
			mu.Unlock()
		})
		wg.Go(func() {
			s, err := Open(ctx, url, Options{})
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows, maxV int
	if err := s.pool.QueryRow(ctx, "SELECT count(*), max(version) FROM fleetmesh.schema_migrations").Scan(&rows, &maxV); err != nil {
		t.Fatal(err)
	}
	if rows != SchemaVersion() || maxV != SchemaVersion() {
		t.Fatalf("schema_migrations holds %d rows up to version %d, want %d", rows, maxV, SchemaVersion())
	}
	if applied > SchemaVersion() {
		t.Fatalf("the migrations were applied %d times in all, want at most %d", applied, SchemaVersion())
	}
	// A database migrated past this build is refused.
	if _, err := s.pool.Exec(ctx, "INSERT INTO fleetmesh.schema_migrations (version, name) VALUES ($1, 'future')", SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, url, Options{}); !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("Open of a schema newer than this build: %v, want ErrSchemaNewer", err)
	}
}
