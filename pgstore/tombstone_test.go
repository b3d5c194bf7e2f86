package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/internal/pgtest"
	"fleetmesh.org/fleetmesh/nostr"
)

// TestTombstonePerDeleter: a NIP-09 tombstone is its deleter's own, as in
// the Pebble store (store.TestTombstonePerDeleter). An event is refused
// once its author asked to delete it, whatever anyone else asks before or
// after, and a stranger's request alone deletes nothing. Key 0 is each
// target's author, key 1 a stranger; each deletion names the target by id
// and, for an addressable one, by address. The rows share one database,
// each with targets of its own.
func TestTombstonePerDeleter(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 2)
	for i, c := range []struct {
		name     string
		kind     int   // the target's kind
		stored   bool  // the target is saved before the deletions
		deleters []int // the keys whose deletion requests arrive, in order
		restart  bool  // the store restarts before the target is re-offered
		want     eventstore.Result
	}{
		{"the author's", 1, true, []int{0}, false, eventstore.Deleted},
		{"the author's, then a stranger's", 1, true, []int{0, 1}, false, eventstore.Deleted},
		{"the author's, then a stranger's, across a restart", 1, true, []int{0, 1}, true, eventstore.Deleted},
		{"a stranger's, then the author's", 1, true, []int{1, 0}, false, eventstore.Deleted},
		{"the author's, then a stranger's, before it arrives", 1, false, []int{0, 1}, false, eventstore.Deleted},
		{"a stranger's only", 1, true, []int{1}, false, eventstore.Duplicate},
		{"a stranger's only, before it arrives", 1, false, []int{1}, false, eventstore.Stored},
		{"addressable: the author's, then a stranger's", 30023, true, []int{0, 1}, false, eventstore.Deleted},
		{"addressable: a stranger's only, before it arrives", 30023, false, []int{1}, false, eventstore.Stored},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := fx.now.Load() - 100
			var tags nostr.Tags
			if nostr.ClassOf(c.kind) == nostr.Addressable {
				tags = nostr.Tags{{"d", fmt.Sprint("post ", i)}}
			}
			target := fx.event(0, c.kind, ts, tags, fmt.Sprint("target ", i))
			if c.stored {
				if r := fx.save(target); r != eventstore.Stored {
					t.Fatalf("target: %v", r)
				}
			}
			for j, k := range c.deleters {
				dtags := nostr.Tags{{"e", target.IDHex()}}
				if nostr.ClassOf(c.kind) == nostr.Addressable {
					dtags = append(dtags, []string{"a", fmt.Sprintf("%d:%x:%s", c.kind, target.PubKey, target.DTag())})
				}
				if r := fx.save(fx.event(k, 5, ts+1, dtags, fmt.Sprint("deletion ", i, j))); r != eventstore.Stored {
					t.Fatalf("deletion %d by key %d: %v", j, k, r)
				}
			}
			if c.restart {
				fx.restart()
			}
			if r := fx.save(target); r != c.want {
				t.Fatalf("target re-offered: %v, want %v", r, c.want)
			}
			served := len(fx.query(nostr.Filter{IDs: [][32]byte{target.ID}}, 1)) == 1
			if wantServed := c.want != eventstore.Deleted; served != wantServed {
				t.Fatalf("target served: %v, want %v", served, wantServed)
			}
		})
	}
}

// TestTombstoneMigration: a database that the schema up to 0002 left, one
// tombstone row per id naming its deleter, migrates to this build's
// schema with its tombstones kept: the deleted event stays refused, and a
// stranger's deletion request naming it does not lift that.
func TestTombstoneMigration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fx := &fixture{t: t}
	fx.now.Store(1_700_000_000)
	for range 2 {
		k, err := nostr.GenerateSecretKey()
		if err != nil {
			t.Fatal(err)
		}
		fx.keys = append(fx.keys, k)
	}
	fx.url = pgtest.Database(t)
	pool, err := pgxpool.New(ctx, fx.url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyMigrations(ctx, pool, ms[:2]); err != nil {
		t.Fatal(err)
	}
	doomed := fx.event(0, 1, fx.now.Load()-10, nil, "doomed")
	if _, err := pool.Exec(ctx, "INSERT INTO fleetmesh.deleted_ids (id, pubkey) VALUES ($1, $2)", doomed.ID[:], doomed.PubKey[:]); err != nil {
		t.Fatal(err)
	}
	fx.s = fx.open()
	t.Cleanup(func() { fx.s.Close() })
	var version int
	if err := pool.QueryRow(ctx, "SELECT max(version) FROM fleetmesh.schema_migrations").Scan(&version); err != nil || version != SchemaVersion() {
		t.Fatalf("schema version after Open: %d (%v), want %d", version, err, SchemaVersion())
	}
	if r := fx.save(doomed); r != eventstore.Deleted {
		t.Fatalf("the deleted event re-offered after the migration: %v", r)
	}
	if r := fx.save(fx.event(1, 5, fx.now.Load(), nostr.Tags{{"e", doomed.IDHex()}}, "")); r != eventstore.Stored {
		t.Fatalf("a stranger's deletion request: %v", r)
	}
	if r := fx.save(doomed); r != eventstore.Deleted {
		t.Fatalf("the deleted event re-offered after a stranger's deletion request: %v", r)
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM fleetmesh.deleted_ids WHERE id = $1", doomed.ID[:]).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d tombstone rows for the id (%v), want the author's and the stranger's", rows, err)
	}
}
