package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/internal/pgtest"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The interfaces the Pebble store serves, which this store serves too:
// the relay's Store and its optional raw querier and lister, and what the
// mesh's sync service calls on a store (meshsync.Local less AddEvent,
// which the node answers through its relay).
var (
	_ relay.Store = (*Store)(nil)
	_ interface {
		QueryRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error
		ListRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error
	} = (*Store)(nil)
	_ interface {
		Query(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event) bool) error
		Delete(ctx context.Context, ids [][32]byte) (int, error)
	} = (*Store)(nil)
	_ interface {
		DiskBytes() uint64
		MaxBytes() uint64
		Close() error
	} = (*Store)(nil)
	_ eventstore.Raw = (*Raw)(nil)
)

type fixture struct {
	t    testing.TB
	url  string
	now  atomic.Int64
	opts Options
	s    *Store
	keys []nostr.SecretKey
}

func newFixture(t testing.TB, nkeys int) *fixture {
	return newFixtureWith(t, nkeys, Options{})
}

func newFixtureWith(t testing.TB, nkeys int, opts Options) *fixture {
	fx := &fixture{t: t, url: pgtest.Database(t), opts: opts}
	fx.now.Store(1_700_000_000)
	for range nkeys {
		k, err := nostr.GenerateSecretKey()
		if err != nil {
			t.Fatal(err)
		}
		fx.keys = append(fx.keys, k)
	}
	fx.s = fx.open()
	t.Cleanup(func() { fx.s.Close() })
	return fx
}

// open opens another store on the fixture's database: another
// front-end's, with its own connections.
// openMany opens n more stores on the fixture's database, closed when
// the test ends: front-ends writing and following at once.
func (fx *fixture) openMany(n int) []*Store {
	fx.t.Helper()
	stores := make([]*Store, n)
	for i := range stores {
		stores[i] = fx.open()
		fx.t.Cleanup(func() { stores[i].Close() })
	}
	return stores
}

func (fx *fixture) open() *Store {
	fx.t.Helper()
	o := fx.opts
	o.Now = func() time.Time { return time.Unix(fx.now.Load(), 0) }
	if o.SweepEvery == 0 {
		o.SweepEvery = time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, fx.url, o)
	if err != nil {
		fx.t.Fatal(err)
	}
	return s
}

func (fx *fixture) restart() {
	fx.t.Helper()
	if err := fx.s.Close(); err != nil {
		fx.t.Fatal(err)
	}
	fx.s = fx.open()
}

func (fx *fixture) event(key, kind int, ts int64, tags nostr.Tags, content string) *nostr.Event {
	if tags == nil {
		tags = nostr.Tags{}
	}
	e := &nostr.Event{CreatedAt: ts, Kind: kind, Tags: tags, Content: content}
	if err := fx.keys[key].Sign(e); err != nil {
		fx.t.Fatal(err)
	}
	return e
}

func (fx *fixture) save(e *nostr.Event) eventstore.Result {
	fx.t.Helper()
	r, err := fx.s.Save(context.Background(), e)
	if err != nil {
		fx.t.Fatal(err)
	}
	return r
}

func (fx *fixture) query(f nostr.Filter, limit int) []*nostr.Event {
	fx.t.Helper()
	return queryAll(fx.t, fx.s, f, limit)
}

func queryAll(t testing.TB, s interface {
	Query(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event) bool) error
}, f nostr.Filter, limit int) []*nostr.Event {
	t.Helper()
	var out []*nostr.Event
	if err := s.Query(context.Background(), &f, limit, func(e *nostr.Event) bool {
		out = append(out, e)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func ids(evs []*nostr.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.IDHex()[:8]
	}
	return out
}

// TestKindRules walks the storage rules of each kind class, step by
// step, each step a save and its expected result and then a query and
// its expected answer.
func TestKindRules(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 2)
	ts := fx.now.Load() - 100
	now := fx.now.Load()
	ev := fx.event
	p1 := ev(0, 0, ts, nil, "v1")
	p2 := ev(0, 0, ts+1, nil, "v2")
	a, b := ev(0, 0, ts+5, nil, "tie-a"), ev(0, 0, ts+5, nil, "tie-b")
	low, high := a, b
	if slices.Compare(a.ID[:], b.ID[:]) > 0 {
		low, high = b, a
	}
	d1 := ev(0, 30023, ts, nostr.Tags{{"d", "x"}}, "x1")
	d2 := ev(0, 30023, ts, nostr.Tags{{"d", "y"}}, "y1")
	d3 := ev(0, 30023, ts+1, nostr.Tags{{"d", "x"}}, "x2")
	n1 := ev(0, 1, ts, nil, "mine")
	n2 := ev(1, 1, ts, nil, "theirs")
	del := ev(0, 5, ts+2, nostr.Tags{{"e", n1.IDHex()}, {"e", n2.IDHex()}, {"a", "30023:" + d2.PubKeyHex() + ":y"}}, "")
	delDel := ev(0, 5, ts+4, nostr.Tags{{"e", del.IDHex()}}, "")
	soon := ev(0, 1, ts, nostr.Tags{{"expiration", fmt.Sprint(now + 10)}}, "soon")
	kind0 := nostr.Filter{Authors: [][32]byte{p1.PubKey}, Kinds: []int{0}}
	k30023 := nostr.Filter{Kinds: []int{30023}}

	steps := []struct {
		name    string
		save    *nostr.Event
		want    eventstore.Result
		advance int64
		filter  *nostr.Filter
		answer  []*nostr.Event
	}{
		{name: "replaceable stored", save: p1, want: eventstore.Stored},
		{name: "a newer version replaces it", save: p2, want: eventstore.Stored, filter: &kind0, answer: []*nostr.Event{p2}},
		{name: "an older version arriving later is superseded", save: p1, want: eventstore.Superseded},
		{name: "tie: higher id first", save: high, want: eventstore.Stored},
		{name: "tie: lower id wins", save: low, want: eventstore.Stored},
		{name: "tie: higher id after lower", save: high, want: eventstore.Superseded, filter: &kind0, answer: []*nostr.Event{low}},
		{name: "addressable x", save: d1, want: eventstore.Stored},
		{name: "addressable y", save: d2, want: eventstore.Stored},
		{name: "addressable x newer", save: d3, want: eventstore.Stored, filter: &k30023, answer: []*nostr.Event{d3, d2}},
		{name: "note mine", save: n1, want: eventstore.Stored},
		{name: "note theirs", save: n2, want: eventstore.Stored},
		{name: "deletion by e and a tags: only the author's own", save: del, want: eventstore.Stored,
			filter: &nostr.Filter{IDs: [][32]byte{n1.ID, n2.ID}}, answer: []*nostr.Event{n2}},
		{name: "a deleted id offered again is refused", save: n1, want: eventstore.Deleted, filter: &k30023, answer: []*nostr.Event{d3}},
		{name: "an address re-published up to the deletion's time is refused",
			save: ev(0, 30023, ts+1, nostr.Tags{{"d", "y"}}, "older than deletion"), want: eventstore.Deleted},
		{name: "deleting a deletion does nothing", save: delDel, want: eventstore.Stored,
			filter: &nostr.Filter{IDs: [][32]byte{del.ID}}, answer: []*nostr.Event{del}},
		{name: "expired on arrival", save: ev(0, 1, ts, nostr.Tags{{"expiration", fmt.Sprint(now - 1)}}, ""), want: eventstore.Expired},
		{name: "expiring later is served", save: soon, want: eventstore.Stored,
			filter: &nostr.Filter{IDs: [][32]byte{soon.ID}}, answer: []*nostr.Event{soon}},
		{name: "and left out once expired", advance: 11, filter: &nostr.Filter{IDs: [][32]byte{soon.ID}}, answer: nil},
		{name: "duplicate", save: d3, want: eventstore.Duplicate},
	}
	for _, st := range steps {
		fx.now.Add(st.advance)
		if st.save != nil {
			if got := fx.save(st.save); got != st.want {
				t.Fatalf("%s: save: %v, want %v", st.name, got, st.want)
			}
		}
		if st.filter != nil {
			if got := fx.query(*st.filter, 10); !slices.Equal(ids(got), ids(st.answer)) {
				t.Fatalf("%s: query: %v, want %v", st.name, ids(got), ids(st.answer))
			}
		}
	}
	// The address re-published after the deletion's time is stored.
	if r := fx.save(ev(0, 30023, ts+3, nostr.Tags{{"d", "y"}}, "newer than deletion")); r != eventstore.Stored {
		t.Fatalf("address re-published after the deletion's time: %v", r)
	}
	// The sweep removes the expired event from the database.
	if n, err := fx.s.SweepExpired(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep removed %d events (err %v), want 1", n, err)
	}
	var rows int
	if err := fx.s.pool.QueryRow(context.Background(), "SELECT count(*) FROM fleetmesh.events WHERE id = $1", soon.ID[:]).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("expired event still in the table after the sweep (%d rows, err %v)", rows, err)
	}
}

// TestEphemeral: an ephemeral event is never stored; Broadcast puts it
// on the feed only, and refuses any other kind.
func TestEphemeral(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 1)
	ctx := context.Background()
	e := fx.event(0, 20001, fx.now.Load(), nil, "live only")
	if _, err := fx.s.Save(ctx, e); err == nil {
		t.Fatal("an ephemeral event was saved")
	}
	if err := fx.s.Broadcast(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := fx.s.Broadcast(ctx, fx.event(0, 1, fx.now.Load(), nil, "")); err == nil {
		t.Fatal("Broadcast took a regular event")
	}
	if got := fx.query(nostr.Filter{Kinds: []int{20001}}, 10); len(got) != 0 {
		t.Fatalf("ephemeral events stored: %v", ids(got))
	}
	cs, err := fx.s.Changes(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Op != OpEphemeral || cs[0].ID != e.ID {
		t.Fatalf("feed: %+v, want the one ephemeral event", cs)
	}
	if got, err := cs[0].Event(); err != nil || got.ID != e.ID || got.Content != e.Content {
		t.Fatalf("feed event decodes to %+v (err %v)", got, err)
	}
}

// TestFull: at MaxBytes a save that would write fails with ErrFull, and
// one that writes nothing (a duplicate) is still answered.
func TestFull(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 1)
	e := fx.event(0, 1, fx.now.Load(), nil, "before the bound")
	fx.save(e)
	fx.s.opts.MaxBytes = 1 // any database is past it
	if _, err := fx.s.Save(context.Background(), fx.event(0, 1, fx.now.Load(), nil, "past the bound")); !errors.Is(err, eventstore.ErrFull) {
		t.Fatalf("save past the bound: %v, want ErrFull", err)
	}
	if r := fx.save(e); r != eventstore.Duplicate {
		t.Fatalf("duplicate past the bound: %v", r)
	}
}

// TestCloseCommitsAccepted closes a store while saves are in flight:
// each save either reports Stored, and its event is in the database, or
// fails with ErrClosed.
func TestCloseCommitsAccepted(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 1)
	evs := makeNotes(fx, 100)
	results := make([]error, len(evs))
	stored := make([]bool, len(evs))
	var wg sync.WaitGroup
	for i, e := range evs {
		wg.Go(func() {
			r, err := fx.s.Save(context.Background(), e)
			results[i], stored[i] = err, r == eventstore.Stored
		})
	}
	// Close once some saves have committed, with the rest in flight.
	deadline := time.Now().Add(time.Minute)
	for {
		h, err := fx.s.Head(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h >= 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fx.s.Close()
	wg.Wait()
	fx.s = fx.open()
	n := 0
	for i, e := range evs {
		got := len(fx.query(nostr.Filter{IDs: [][32]byte{e.ID}}, 1)) == 1
		switch {
		case results[i] == nil && stored[i] && got:
			n++
		case errors.Is(results[i], ErrClosed) && !got:
		default:
			t.Fatalf("save %d: err %v, stored %v, in the database %v", i, results[i], stored[i], got)
		}
	}
	t.Logf("%d of %d saves committed before Close", n, len(evs))
}

// FuzzParseAddress: an "a" tag value either parses into a slot that
// prints back to an address that parses the same, or is refused.
func FuzzParseAddress(f *testing.F) {
	f.Add("30023:" + fmt.Sprintf("%064x", 7) + ":my-article")
	f.Add("10002:" + fmt.Sprintf("%064x", 1) + ":ignored")
	f.Add("1::")
	f.Add("-1:zz:")
	f.Fuzz(func(t *testing.T, a string) {
		sl, ok := parseAddress(a)
		if !ok {
			return
		}
		if sl.kind < 0 || sl.kind > nostr.MaxKind {
			t.Fatalf("%q parsed to kind %d", a, sl.kind)
		}
		again, ok := parseAddress(fmt.Sprintf("%d:%x:%s", sl.kind, sl.pubkey, sl.d))
		if !ok || again != sl {
			t.Fatalf("%q parsed to %+v, which prints to an address that parses to %+v (ok %v)", a, sl, again, ok)
		}
	})
}
