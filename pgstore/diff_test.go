package pgstore

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

var (
	diffSeeds = flag.Int("pgstore.seeds", 2, "random operation sequences TestAgainstPebble runs")
	diffSteps = flag.Int("pgstore.steps", 200, "operations in each of TestAgainstPebble's sequences")
	diffSeed  = flag.Int64("pgstore.seed", -1, "run TestAgainstPebble on this seed only (a failure prints its seed)")
)

// TestAgainstPebble runs random operation sequences (saves of every kind
// class, re-saves, deletion requests, hand-off deletes, the clock moving
// past expirations, restarts of the PostgreSQL store; not the expiration
// sweep, whose timing differs between the two) against this store
// and the Pebble store and compares every answer: each save's result,
// each query's events in order with and without a limit, each count and
// each unordered listing. -pgstore.seeds and -pgstore.steps make it
// longer; a failure names its seed, which -pgstore.seed replays.
func TestAgainstPebble(t *testing.T) {
	seeds := make([]int64, 0, *diffSeeds)
	if *diffSeed >= 0 {
		seeds = append(seeds, *diffSeed)
	} else {
		for i := range *diffSeeds {
			seeds = append(seeds, int64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runDiff(t, seed, *diffSteps)
		})
	}
}

func runDiff(t *testing.T, seed int64, steps int) {
	r := rand.New(rand.NewPCG(uint64(seed), 42))
	fx := newFixture(t, 4)
	peb, err := store.Open(t.TempDir(), store.Options{
		Now:        func() time.Time { return time.Unix(fx.now.Load(), 0) },
		SweepEvery: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer peb.Close()
	ctx := context.Background()
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (replay: -run TestAgainstPebble -pgstore.seed %d) step %d: %s", seed, seed, step, fmt.Sprintf(format, args...))
	}
	var history []*nostr.Event
	for step := range steps {
		switch op := r.IntN(20); {
		case op == 0:
			fx.restart()
		case op == 1:
			fx.now.Add(int64(r.IntN(5)))
		case op == 2 && len(history) > 0:
			var del [][32]byte
			for range 1 + r.IntN(3) {
				del = append(del, history[r.IntN(len(history))].ID)
			}
			n, err := fx.s.Delete(ctx, del)
			if err != nil {
				fail(step, "delete: %v", err)
			}
			if want, err := peb.Delete(ctx, del); err != nil || n != want {
				fail(step, "delete removed %d events, Pebble %d (err %v)", n, want, err)
			}
		case op < 12 || len(history) == 0:
			e := randomEvent(r, fx, history, fmt.Sprint(step))
			history = append(history, e)
			saveBoth(t, fx, peb, e, func(format string, args ...any) { fail(step, format, args...) })
		case op < 15:
			e := history[r.IntN(len(history))]
			saveBoth(t, fx, peb, e, func(format string, args ...any) { fail(step, format, args...) })
		default:
			f := randomFilter(r, fx, history)
			want := queryAll(t, peb, f, 1000)
			got := fx.query(f, 1000)
			if !slices.Equal(ids(got), ids(want)) {
				fail(step, "filter %+v:\npgstore %v\npebble  %v", f, ids(got), ids(want))
			}
			if len(want) > 1 {
				n := 1 + r.IntN(len(want))
				if lim := fx.query(f, n); !slices.Equal(ids(lim), ids(want[:n])) {
					fail(step, "filter %+v limit %d: pgstore %v, pebble %v", f, n, ids(lim), ids(want[:n]))
				}
			}
			n, approx, err := fx.s.Count(ctx, &f)
			if err != nil || approx || n != int64(len(want)) {
				fail(step, "count %+v: %d (approximate %v, err %v), want %d", f, n, approx, err, len(want))
			}
			var listed []*nostr.Event
			if err := fx.s.ListRaw(ctx, &f, 1000, func(r eventstore.Raw) bool {
				e, err := r.Event()
				if err != nil {
					fail(step, "listed event: %v", err)
				}
				listed = append(listed, e)
				return true
			}); err != nil {
				fail(step, "list: %v", err)
			}
			slices.SortFunc(listed, newestFirst)
			if !slices.Equal(ids(listed), ids(want)) {
				fail(step, "list %+v: pgstore %v, pebble %v", f, ids(listed), ids(want))
			}
		}
	}
}

func saveBoth(t *testing.T, fx *fixture, peb *store.Store, e *nostr.Event, fail func(string, ...any)) {
	t.Helper()
	got, err := fx.s.Save(context.Background(), e)
	if err != nil {
		fail("save: %v", err)
	}
	want, err := peb.Save(context.Background(), e)
	if err != nil {
		fail("pebble save: %v", err)
	}
	if got != want {
		fail("save kind %d %s: pgstore %v, pebble %v", e.Kind, e.IDHex()[:8], got, want)
	}
}

// newestFirst is NIP-01's order: newest first, ties by lowest id.
func newestFirst(a, b *nostr.Event) int {
	if a.CreatedAt != b.CreatedAt {
		return int(b.CreatedAt - a.CreatedAt)
	}
	return slices.Compare(a.ID[:], b.ID[:])
}

// randomEvent makes an event of a random kind class by one of the
// fixture's keys, with the tags the kind rules look at; a deletion names
// an earlier event by id and, if it has one, by address.
func randomEvent(r *rand.Rand, fx *fixture, history []*nostr.Event, content string) *nostr.Event {
	kinds := []int{1, 7, 0, 3, 10002, 30023, 30000, 5}
	kind := kinds[r.IntN(len(kinds))]
	now := fx.now.Load()
	var tags nostr.Tags
	if nostr.ClassOf(kind) == nostr.Addressable {
		tags = append(tags, []string{"d", []string{"", "a", "b"}[r.IntN(3)]})
	}
	if r.IntN(3) == 0 {
		tags = append(tags, []string{"t", []string{"x", "y"}[r.IntN(2)]})
	}
	if r.IntN(4) == 0 {
		tags = append(tags, []string{"p", []string{"x", "z"}[r.IntN(2)], "wss://relay.example"})
	}
	if r.IntN(8) == 0 {
		tags = append(tags, []string{"expiration", fmt.Sprint(now + int64(r.IntN(6)) - 1)})
	}
	if kind == 5 && len(history) > 0 {
		target := history[r.IntN(len(history))]
		tags = append(tags, []string{"e", target.IDHex()})
		switch nostr.ClassOf(target.Kind) {
		case nostr.Addressable:
			tags = append(tags, []string{"a", fmt.Sprintf("%d:%x:%s", target.Kind, target.PubKey, target.DTag())})
		case nostr.Replaceable:
			tags = append(tags, []string{"a", fmt.Sprintf("%d:%x:", target.Kind, target.PubKey)})
		}
	}
	return fx.event(r.IntN(len(fx.keys)), kind, now-int64(r.IntN(10)), tags, content)
}

func randomFilter(r *rand.Rand, fx *fixture, history []*nostr.Event) nostr.Filter {
	var f nostr.Filter
	now := fx.now.Load()
	if r.IntN(4) == 0 && len(history) > 0 {
		f.IDs = [][32]byte{history[r.IntN(len(history))].ID, history[r.IntN(len(history))].ID}
	}
	if r.IntN(2) == 0 {
		f.Authors = [][32]byte{fx.keys[r.IntN(len(fx.keys))].PubKey()}
		if r.IntN(3) == 0 {
			f.Authors = append(f.Authors, fx.keys[r.IntN(len(fx.keys))].PubKey())
		}
	}
	if r.IntN(2) == 0 {
		kinds := []int{1, 7, 0, 3, 10002, 30023, 30000, 5}
		f.Kinds = []int{kinds[r.IntN(len(kinds))]}
		if r.IntN(3) == 0 {
			f.Kinds = append(f.Kinds, kinds[r.IntN(len(kinds))])
		}
	}
	if r.IntN(3) == 0 {
		f.Tags = map[string][]string{"t": {[]string{"x", "y"}[r.IntN(2)]}}
		if r.IntN(3) == 0 {
			f.Tags["t"] = append(f.Tags["t"], "y")
		}
	}
	if r.IntN(5) == 0 {
		if f.Tags == nil {
			f.Tags = map[string][]string{}
		}
		f.Tags["p"] = []string{[]string{"x", "z"}[r.IntN(2)]}
	}
	if r.IntN(3) == 0 {
		f.Since = now - int64(r.IntN(10))
	}
	if r.IntN(3) == 0 {
		f.Until, f.HasUntil = now-int64(r.IntN(10)), true
	}
	return f
}
