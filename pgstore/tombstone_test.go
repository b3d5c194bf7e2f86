package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// olderSchema is a fixture with nkeys keys whose database an older build
// left at schema version (its first migrations applied), with no store
// open on it yet, and a pool on that database, closed when the test ends.
func olderSchema(ctx context.Context, t *testing.T, nkeys, version int) (*fixture, *pgxpool.Pool) {
	t.Helper()
	fx := &fixture{t: t}
	fx.now.Store(1_700_000_000)
	for range nkeys {
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
	t.Cleanup(pool.Close)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyMigrations(ctx, pool, ms[:version]); err != nil {
		t.Fatal(err)
	}
	return fx, pool
}

// TestTombstoneMigration: a database that the schema up to 0002 left, one
// tombstone row per id naming its deleter, migrates to this build's
// schema with its tombstones kept: the deleted event stays refused, and a
// stranger's deletion request naming it does not lift that.
func TestTombstoneMigration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fx, pool := olderSchema(ctx, t, 2, 2)
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

// TestTagOrderMigration: a database written before migration 0005, whose
// tags rows carry no event id, migrates with every row given its event's
// id, and a query by tag then answers in the relay's order (newest first,
// a tie broken by the lowest id), as a database written since does.
func TestTagOrderMigration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fx, pool := olderSchema(ctx, t, 1, 4)
	// Four notes with one hashtag, three of them at one second: the
	// oldest is left out of a limit of three, and the tie is ordered by
	// id.
	ts := fx.now.Load() - 100
	var evs []*nostr.Event
	for i, at := range []int64{ts - 1, ts, ts, ts} {
		e := fx.event(0, 1, at, nostr.Tags{{"t", "nostr"}}, fmt.Sprint("note ", i))
		evs = append(evs, e)
		var res int32
		if err := pool.QueryRow(ctx, "SELECT result FROM fleetmesh.save_event($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
			e.ID[:], e.PubKey[:], e.CreatedAt, e.Kind, nil, nil, e.AppendJSON(nil), tagValues(e),
			[][]byte{}, []int32{}, [][]byte{}, false).Scan(&res); err != nil || res != 0 {
			t.Fatalf("saving at schema version 4: result %d, %v", res, err)
		}
	}
	fx.s = fx.open()
	t.Cleanup(func() { fx.s.Close() })
	var missing int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM fleetmesh.tags t JOIN fleetmesh.events e ON e.serial = t.serial WHERE t.id IS DISTINCT FROM e.id").Scan(&missing); err != nil || missing != 0 {
		t.Fatalf("%d tags rows without their event's id after the migration (%v)", missing, err)
	}
	want := slices.Clone(evs[1:])
	slices.SortFunc(want, func(a, b *nostr.Event) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	for _, vals := range [][]string{{"nostr"}, {"nostr", "bitcoin"}} {
		got := fx.query(nostr.Filter{Kinds: []int{1}, Tags: map[string][]string{"t": vals}}, 3)
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("#t %v, limit 3: %v, want %v", vals, ids(got), ids(want))
		}
	}
	// A note saved since the migration is in the walk too.
	newer := fx.event(0, 1, ts+1, nostr.Tags{{"t", "nostr"}}, "since")
	fx.save(newer)
	if got := fx.query(nostr.Filter{Tags: map[string][]string{"t": {"nostr"}}}, 1); len(got) != 1 || got[0].ID != newer.ID {
		t.Fatalf("#t after a save: %v, want the new note", ids(got))
	}
}

// TestTagWalkStopsAtLimit: a REQ by a popular tag reads about as many of
// its tags rows as it returns, not all of them, whether the database's
// statistics are up to date or were taken when it held a few events (as
// they are on a young database, and may be when a tag catches on): the
// walk takes
// tags_by_value_time_id in the order it answers in and stops at the
// limit (the plan PostgreSQL runs, as query runs it, counted from
// EXPLAIN ANALYZE).
func TestTagWalkStopsAtLimit(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 1)
	ctx := context.Background()
	const stored, limit = 2000, 20
	save := func(from, to int) {
		done := make(chan struct{})
		for w := range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				for i := from + w; i < to; i += 4 {
					if _, err := fx.s.Save(ctx, fx.event(0, 1, fx.now.Load()-int64(i), nostr.Tags{{"t", "popular"}, {"t", fmt.Sprint("rare", i)}}, "")); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		for range 4 {
			<-done
		}
	}
	analyze := func() {
		if _, err := fx.s.pool.Exec(ctx, "ANALYZE fleetmesh.tags; ANALYZE fleetmesh.events"); err != nil {
			t.Fatal(err)
		}
	}
	// Statistics taken when the tables held a few events, then many
	// more saved: the planner believes the tag and the kind rare.
	save(0, 0)
	analyze()
	save(0, stored)
	read := func(f nostr.Filter) (float64, string) {
		q, args, tagWalk := buildQuery(&f, fx.now.Load(), limit, true, "e.raw")
		if !tagWalk {
			t.Fatalf("%v is not a tag walk", f)
		}
		var plan []map[string]any
		err := pgx.BeginTxFunc(ctx, fx.s.read, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, tagWalkSetting); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q, args...).Scan(&plan)
		})
		if err != nil {
			t.Fatal(err)
		}
		var sum func(n map[string]any) float64
		sum = func(n map[string]any) float64 {
			total := 0.0
			if n["Relation Name"] == "tags" {
				rows, _ := n["Actual Rows"].(float64)
				loops, _ := n["Actual Loops"].(float64)
				total += rows * loops
			}
			if kids, ok := n["Plans"].([]any); ok {
				for _, k := range kids {
					total += sum(k.(map[string]any))
				}
			}
			return total
		}
		if jit, ok := plan[0]["JIT"]; ok {
			// The disabled sort's cost penalty calls JIT in unless it
			// is off: a compile of about 175 ms for a sub-ms walk.
			t.Errorf("#t %v: the walk was JIT-compiled: %v", f.Tags["t"], jit)
		}
		js, _ := json.MarshalIndent(plan[0]["Plan"], "", " ")
		return sum(plan[0]["Plan"].(map[string]any)), string(js)
	}
	for _, stats := range []string{"stale statistics", "analyzed"} {
		if stats == "analyzed" {
			analyze()
		}
		for _, vals := range [][]string{{"popular"}, {"popular", "rare7"}} {
			for _, kinds := range [][]int{nil, {1}} {
				f := nostr.Filter{Kinds: kinds, Tags: map[string][]string{"t": vals}}
				if got, plan := read(f); got > 3*limit {
					t.Errorf("%s: #t %v kinds %v, limit %d: the plan read %.0f of the tag's %d rows, want about the limit:\n%s", stats, vals, kinds, limit, got, stored, plan)
				}
			}
		}
	}
}
