package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

type fixture struct {
	t    testing.TB
	opts Options // besides the clock
	dir  string
	now  int64
	s    *Store
	keys []nostr.SecretKey
}

func newFixture(t testing.TB, nkeys int) *fixture {
	return newFixtureWith(t, nkeys, Options{}, t.TempDir())
}

func newFixtureWith(t testing.TB, nkeys int, opts Options, dir string) *fixture {
	fx := &fixture{t: t, opts: opts, dir: dir, now: 1_700_000_000}
	for range nkeys {
		k, err := nostr.GenerateSecretKey()
		if err != nil {
			t.Fatal(err)
		}
		fx.keys = append(fx.keys, k)
	}
	fx.open()
	t.Cleanup(func() { fx.s.Close() })
	return fx
}

func (fx *fixture) open() {
	o := fx.opts
	o.Now = func() time.Time { return time.Unix(fx.now, 0) }
	o.SweepEvery = time.Hour
	s, err := Open(fx.dir, o)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.s = s
}

// compact waits for the id and segment loader, then has the writer run
// every record compaction step there is work for.
func (fx *fixture) compact() {
	<-fx.s.knownLoaded
	done := make(chan struct{})
	fx.s.compactReq <- done
	<-done
}

func (fx *fixture) restart() {
	if err := fx.s.Close(); err != nil {
		fx.t.Fatal(err)
	}
	fx.open()
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

func (fx *fixture) save(e *nostr.Event) Result {
	fx.t.Helper()
	r, err := fx.s.Save(context.Background(), e)
	if err != nil {
		fx.t.Fatal(err)
	}
	return r
}

func (fx *fixture) query(f nostr.Filter, limit int) []*nostr.Event {
	fx.t.Helper()
	var out []*nostr.Event
	if err := fx.s.Query(context.Background(), &f, limit, func(e *nostr.Event) bool {
		out = append(out, e)
		return true
	}); err != nil {
		fx.t.Fatal(err)
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

func TestKindRules(t *testing.T) {
	fx := newFixture(t, 2)
	ts := fx.now - 100

	// Replaceable: newest wins; an older one arriving later is superseded;
	// on equal created_at the lowest id wins.
	p1 := fx.event(0, 0, ts, nil, "v1")
	p2 := fx.event(0, 0, ts+1, nil, "v2")
	if r := fx.save(p1); r != Stored {
		t.Fatalf("p1: %v", r)
	}
	if r := fx.save(p2); r != Stored {
		t.Fatalf("p2: %v", r)
	}
	if r := fx.save(p1); r != Superseded {
		t.Fatalf("p1 again: %v", r)
	}
	got := fx.query(nostr.Filter{Authors: [][32]byte{p1.PubKey}, Kinds: []int{0}}, 10)
	if len(got) != 1 || got[0].ID != p2.ID {
		t.Fatalf("replaceable: got %v", ids(got))
	}
	a := fx.event(0, 0, ts+5, nil, "tie-a")
	b := fx.event(0, 0, ts+5, nil, "tie-b")
	low, high := a, b
	if slices.Compare(a.ID[:], b.ID[:]) > 0 {
		low, high = b, a
	}
	fx.save(high)
	fx.save(low)
	if r := fx.save(high); r != Superseded {
		t.Fatalf("tie: higher id after lower: %v", r)
	}
	got = fx.query(nostr.Filter{Authors: [][32]byte{p1.PubKey}, Kinds: []int{0}}, 10)
	if len(got) != 1 || got[0].ID != low.ID {
		t.Fatalf("tie: got %v, want lowest id", ids(got))
	}

	// Addressable: one per d tag.
	d1 := fx.event(0, 30023, ts, nostr.Tags{{"d", "x"}}, "x1")
	d2 := fx.event(0, 30023, ts, nostr.Tags{{"d", "y"}}, "y1")
	d3 := fx.event(0, 30023, ts+1, nostr.Tags{{"d", "x"}}, "x2")
	for _, e := range []*nostr.Event{d1, d2, d3} {
		fx.save(e)
	}
	got = fx.query(nostr.Filter{Kinds: []int{30023}}, 10)
	if len(got) != 2 || got[0].ID != d3.ID || got[1].ID != d2.ID {
		t.Fatalf("addressable: got %v", ids(got))
	}

	// Deletion by e tag only removes the deleter's own events; tombstones
	// refuse them later.
	n1 := fx.event(0, 1, ts, nil, "mine")
	n2 := fx.event(1, 1, ts, nil, "theirs")
	fx.save(n1)
	fx.save(n2)
	del := fx.event(0, 5, ts+2, nostr.Tags{{"e", n1.IDHex()}, {"e", n2.IDHex()}, {"a", "30023:" + d2.PubKeyHex() + ":y"}}, "")
	if r := fx.save(del); r != Stored {
		t.Fatalf("deletion: %v", r)
	}
	if got := fx.query(nostr.Filter{IDs: [][32]byte{n1.ID, n2.ID}}, 10); len(got) != 1 || got[0].ID != n2.ID {
		t.Fatalf("after deletion: %v", ids(got))
	}
	if r := fx.save(n1); r != Deleted {
		t.Fatalf("re-publish deleted: %v", r)
	}
	if got := fx.query(nostr.Filter{Kinds: []int{30023}}, 10); len(got) != 1 || got[0].ID != d3.ID {
		t.Fatalf("a-tag deletion: %v", ids(got))
	}
	if r := fx.save(fx.event(0, 30023, ts+1, nostr.Tags{{"d", "y"}}, "older than deletion")); r != Deleted {
		t.Fatalf("address re-publish before deletion time: %v", r)
	}
	if r := fx.save(fx.event(0, 30023, ts+3, nostr.Tags{{"d", "y"}}, "newer than deletion")); r != Stored {
		t.Fatalf("address re-publish after deletion time: %v", r)
	}
	// Deleting a deletion does nothing.
	fx.save(fx.event(0, 5, ts+4, nostr.Tags{{"e", del.IDHex()}}, ""))
	if got := fx.query(nostr.Filter{IDs: [][32]byte{del.ID}}, 1); len(got) != 1 {
		t.Fatal("a deletion request was deleted")
	}

	// Expiration: expired on arrival is refused; expiring later disappears
	// from queries, then from disk.
	if r := fx.save(fx.event(0, 1, ts, nostr.Tags{{"expiration", fmt.Sprint(fx.now - 1)}}, "")); r != Expired {
		t.Fatalf("expired on arrival: %v", r)
	}
	soon := fx.event(0, 1, ts, nostr.Tags{{"expiration", fmt.Sprint(fx.now + 10)}}, "soon")
	fx.save(soon)
	if got := fx.query(nostr.Filter{IDs: [][32]byte{soon.ID}}, 1); len(got) != 1 {
		t.Fatal("not yet expired event missing")
	}
	fx.now += 11
	if got := fx.query(nostr.Filter{IDs: [][32]byte{soon.ID}}, 1); len(got) != 0 {
		t.Fatal("expired event still served")
	}
	if err := fx.s.sweepExpired(); err != nil {
		t.Fatal(err)
	}
	if _, c, err := fx.s.db.Get(idKey(soon.ID)); err == nil {
		c.Close()
		t.Fatal("expired event still on disk after sweep")
	}
	if r := fx.save(d3); r != Duplicate {
		t.Fatalf("duplicate: %v", r)
	}
}

// TestTombstonePerDeleter: a NIP-09 tombstone is its deleter's own. An
// event is refused once its author asked to delete it, whatever anyone
// else asks before or after (a stranger's request naming the same id or
// address neither lifts nor replaces the author's), and a stranger's
// request alone deletes nothing. Key 0 is the target's author, key 1 a
// stranger; each deletion names the target by id and, for an
// addressable one, by address, one second after it was made.
func TestTombstonePerDeleter(t *testing.T) {
	for _, c := range []struct {
		name     string
		kind     int   // the target's kind
		stored   bool  // the target is saved before the deletions
		deleters []int // the keys whose deletion requests arrive, in order
		restart  bool  // the store restarts before the target is re-offered
		want     Result
	}{
		{"the author's", 1, true, []int{0}, false, Deleted},
		{"the author's, then a stranger's", 1, true, []int{0, 1}, false, Deleted},
		{"the author's, then a stranger's, across a restart", 1, true, []int{0, 1}, true, Deleted},
		{"a stranger's, then the author's", 1, true, []int{1, 0}, false, Deleted},
		{"the author's, then a stranger's, before it arrives", 1, false, []int{0, 1}, false, Deleted},
		{"a stranger's, then the author's, before it arrives", 1, false, []int{1, 0}, true, Deleted},
		{"a stranger's only", 1, true, []int{1}, false, Duplicate},
		{"a stranger's only, before it arrives", 1, false, []int{1}, true, Stored},
		{"addressable: the author's, then a stranger's", 30023, true, []int{0, 1}, false, Deleted},
		{"addressable: the author's, then a stranger's, before it arrives", 30023, false, []int{0, 1}, true, Deleted},
		{"addressable: a stranger's only", 30023, false, []int{1}, false, Stored},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx := newFixture(t, 2)
			ts := fx.now - 100
			var tags nostr.Tags
			if nostr.ClassOf(c.kind) == nostr.Addressable {
				tags = nostr.Tags{{"d", "post"}}
			}
			target := fx.event(0, c.kind, ts, tags, "target")
			if c.stored {
				if r := fx.save(target); r != Stored {
					t.Fatalf("target: %v", r)
				}
			}
			for i, k := range c.deleters {
				dtags := nostr.Tags{{"e", target.IDHex()}}
				if a := addrOf(target); a != "" {
					dtags = append(dtags, []string{"a", a})
				}
				if r := fx.save(fx.event(k, 5, ts+1, dtags, fmt.Sprint("deletion ", i))); r != Stored {
					t.Fatalf("deletion %d by key %d: %v", i, k, r)
				}
			}
			if c.restart {
				fx.restart()
			}
			if r := fx.save(target); r != c.want {
				t.Fatalf("target re-offered: %v, want %v", r, c.want)
			}
			served := len(fx.query(nostr.Filter{IDs: [][32]byte{target.ID}}, 1)) == 1
			if wantServed := c.want != Deleted; served != wantServed {
				t.Fatalf("target served: %v, want %v", served, wantServed)
			}
		})
	}
}

// model is the reference: a map and a sort, applying NIP-01/09/40 rules in
// the plainest way.
type model struct {
	events map[[32]byte]*nostr.Event
	// delIDs holds a tombstone per id and deleter: {id, pubkey}.
	delIDs  map[[2][32]byte]bool
	delAddr map[string]int64
}

func newModel() *model {
	return &model{events: map[[32]byte]*nostr.Event{}, delIDs: map[[2][32]byte]bool{}, delAddr: map[string]int64{}}
}

func addrOf(e *nostr.Event) string {
	switch nostr.ClassOf(e.Kind) {
	case nostr.Replaceable:
		return fmt.Sprintf("%d:%x:", e.Kind, e.PubKey)
	case nostr.Addressable:
		return fmt.Sprintf("%d:%x:%s", e.Kind, e.PubKey, e.DTag())
	}
	return ""
}

func (m *model) save(e *nostr.Event, now int64) Result {
	if exp, ok := e.Expiration(); ok && exp <= now {
		return Expired
	}
	if _, ok := m.events[e.ID]; ok {
		return Duplicate
	}
	if m.delIDs[[2][32]byte{e.ID, e.PubKey}] {
		return Deleted
	}
	if a := addrOf(e); a != "" {
		if upTo, ok := m.delAddr[a]; ok && e.CreatedAt <= upTo {
			return Deleted
		}
		for id, old := range m.events {
			if addrOf(old) == a {
				if old.CreatedAt > e.CreatedAt || (old.CreatedAt == e.CreatedAt && slices.Compare(old.ID[:], e.ID[:]) < 0) {
					return Superseded
				}
				delete(m.events, id)
			}
		}
	}
	m.events[e.ID] = e
	if e.Kind == 5 {
		for _, t := range e.Tags {
			if len(t) < 2 {
				continue
			}
			switch t[0] {
			case "e":
				var id [32]byte
				if b, err := hex.DecodeString(t[1]); err == nil && len(b) == 32 {
					copy(id[:], b)
					m.delIDs[[2][32]byte{id, e.PubKey}] = true
					if old, ok := m.events[id]; ok && old.PubKey == e.PubKey && old.Kind != 5 {
						delete(m.events, id)
					}
				}
			case "a":
				kind, pub, d, ok := parseAddress(t[1])
				if !ok || pub != e.PubKey {
					continue
				}
				a := fmt.Sprintf("%d:%x:%s", kind, pub, d)
				m.delAddr[a] = max(m.delAddr[a], e.CreatedAt)
				for id, old := range m.events {
					if addrOf(old) == a && old.CreatedAt <= e.CreatedAt {
						delete(m.events, id)
					}
				}
			}
		}
	}
	return Stored
}

// delete removes the events among ids, leaving no tombstone, and returns
// how many it removed.
func (m *model) delete(ids [][32]byte) int {
	n := 0
	for _, id := range ids {
		if _, ok := m.events[id]; ok {
			delete(m.events, id)
			n++
		}
	}
	return n
}

func (m *model) query(f *nostr.Filter, now int64) []*nostr.Event {
	var out []*nostr.Event
	if f.Empty() {
		return nil
	}
	for _, e := range m.events {
		if exp, ok := e.Expiration(); ok && exp <= now {
			continue
		}
		if f.Matches(e) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, newestFirst)
	return out
}

// TestAgainstModel runs random operation sequences, with restarts, against
// the store and the reference model and compares every answer. Odd seeds
// use record segments of 2 KiB, so that segments are sealed every few
// saves, and compact them now and then.
func TestAgainstModel(t *testing.T) {
	seeds := 4
	steps := 300
	if testing.Short() {
		seeds, steps = 2, 150
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 42))
			var opts Options
			if seed%2 == 1 {
				opts.segmentBytes = 2 << 10
			}
			fx := newFixtureWith(t, 4, opts, t.TempDir())
			m := newModel()
			var history []*nostr.Event
			for step := range steps {
				switch op := r.IntN(20); {
				case op == 0:
					fx.restart()
				case op == 1:
					fx.now += int64(r.IntN(5))
				case op == 2 && len(history) > 0:
					// Delete a few events, stored or not (the mesh's
					// hand-off): no tombstone is left.
					var del [][32]byte
					for range 1 + r.IntN(3) {
						del = append(del, history[r.IntN(len(history))].ID)
					}
					n, err := fx.s.Delete(context.Background(), del)
					if err != nil {
						t.Fatalf("step %d: delete: %v", step, err)
					}
					if want := m.delete(del); n != want {
						t.Fatalf("step %d: delete removed %d events, model %d", step, n, want)
					}
				case op == 3 && opts.segmentBytes > 0:
					fx.compact()
				case op < 12 || len(history) == 0:
					e := randomEvent(r, fx, history, fmt.Sprint(step))
					history = append(history, e)
					if got, want := fx.save(e), m.save(e, fx.now); got != want {
						t.Fatalf("step %d: save kind %d: store %v, model %v", step, e.Kind, got, want)
					}
				case op < 15:
					e := history[r.IntN(len(history))]
					if got, want := fx.save(e), m.save(e, fx.now); got != want {
						t.Fatalf("step %d: re-save: store %v, model %v", step, got, want)
					}
				default:
					f := randomFilter(r, fx, history)
					want := m.query(&f, fx.now)
					got := fx.query(f, 1000)
					slices.SortFunc(got, newestFirst)
					if !slices.Equal(ids(got), ids(want)) {
						t.Fatalf("step %d: filter %+v:\nstore %v\nmodel %v", step, f, ids(got), ids(want))
					}
					if len(want) > 1 {
						n := 1 + r.IntN(len(want))
						if lim := fx.query(f, n); !slices.Equal(ids(lim), ids(want[:n])) {
							t.Fatalf("step %d: limit %d returned %v, want the newest (ties: lowest id) %v", step, n, ids(lim), ids(want[:n]))
						}
					}
				}
			}
		})
	}
}

// randomEvent makes an event of a random kind class by one of four keys,
// with the tags the kind rules look at; a deletion names an earlier event.
func randomEvent(r *rand.Rand, fx *fixture, history []*nostr.Event, content string) *nostr.Event {
	kinds := []int{1, 7, 0, 3, 10002, 30023, 30000, 5}
	kind := kinds[r.IntN(len(kinds))]
	var tags nostr.Tags
	if nostr.ClassOf(kind) == nostr.Addressable {
		tags = append(tags, []string{"d", []string{"", "a", "b"}[r.IntN(3)]})
	}
	if r.IntN(3) == 0 {
		tags = append(tags, []string{"t", []string{"x", "y"}[r.IntN(2)]})
	}
	if r.IntN(8) == 0 {
		tags = append(tags, []string{"expiration", fmt.Sprint(fx.now + int64(r.IntN(6)) - 1)})
	}
	if kind == 5 && len(history) > 0 {
		target := history[r.IntN(len(history))]
		tags = append(tags, []string{"e", target.IDHex()})
		if a := addrOf(target); a != "" && nostr.ClassOf(target.Kind) == nostr.Addressable {
			tags = append(tags, []string{"a", a})
		}
	}
	return fx.event(r.IntN(len(fx.keys)), kind, fx.now-int64(r.IntN(10)), tags, content)
}

func randomFilter(r *rand.Rand, fx *fixture, history []*nostr.Event) nostr.Filter {
	var f nostr.Filter
	if r.IntN(4) == 0 && len(history) > 0 {
		f.IDs = [][32]byte{history[r.IntN(len(history))].ID, history[r.IntN(len(history))].ID}
	}
	if r.IntN(2) == 0 {
		f.Authors = [][32]byte{fx.keys[r.IntN(4)].PubKey()}
	}
	if r.IntN(2) == 0 {
		f.Kinds = []int{[]int{1, 7, 0, 3, 10002, 30023, 30000, 5}[r.IntN(8)]}
	}
	if r.IntN(3) == 0 {
		f.Tags = map[string][]string{"t": {[]string{"x", "y"}[r.IntN(2)]}}
	}
	if r.IntN(3) == 0 {
		f.Since = fx.now - int64(r.IntN(10))
	}
	if r.IntN(3) == 0 {
		f.Until, f.HasUntil = fx.now-int64(r.IntN(10)), true
	}
	return f
}

func FuzzDecodeEvent(f *testing.F) {
	k, _ := nostr.GenerateSecretKey()
	e := &nostr.Event{CreatedAt: 7, Kind: 30023, Tags: nostr.Tags{{"d", "x"}, {"t", "a", "b"}}, Content: "hello"}
	_ = k.Sign(e)
	f.Add(encodeEvent(nil, e))
	f.Add(make([]byte, 128))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev nostr.Event
		if decodeEvent(b, &ev) != nil {
			return
		}
		var again nostr.Event
		if err := decodeEvent(encodeEvent(nil, &ev), &again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}
