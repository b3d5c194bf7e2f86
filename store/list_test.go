package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// TestListRawAgainstModel checks that ListRaw lists exactly what the
// reference model holds, for the whole store (its one-pass path: no
// replaced, deleted or expired event, nothing twice) and for a filter
// that goes through QueryRaw, through saves, re-saves, deletions, time
// passing and restarts.
func TestListRawAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 42))
	fx := newFixture(t, 4)
	m := newModel()
	var history []*nostr.Event
	list := func(f nostr.Filter, limit int) []string {
		var out []string
		if err := fx.s.ListRaw(context.Background(), &f, limit, func(r eventstore.Raw) bool {
			id := r.ID()
			out = append(out, fmt.Sprintf("%x", id[:4]))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	want := func(f nostr.Filter) []string {
		var out []string
		for _, e := range m.query(&f, fx.now) {
			out = append(out, e.IDHex()[:8])
		}
		slices.Sort(out)
		return out
	}
	for step := range 300 {
		switch op := r.IntN(20); {
		case op == 0:
			fx.restart()
		case op == 1:
			fx.now += int64(r.IntN(5))
		case op < 14 || len(history) == 0:
			e := randomEvent(r, fx, history, fmt.Sprint(step))
			history = append(history, e)
			fx.save(e)
			m.save(e, fx.now)
		default:
			for _, f := range []nostr.Filter{{}, {Kinds: []int{1}}} {
				if got, w := list(f, 10_000), want(f); !slices.Equal(got, w) {
					t.Fatalf("step %d: filter %+v: ListRaw %v, model %v", step, f, got, w)
				}
			}
			if n := len(want(nostr.Filter{})); n > 1 {
				if got := list(nostr.Filter{}, n/2); len(got) != n/2 {
					t.Fatalf("step %d: limit %d listed %d", step, n/2, len(got))
				}
			}
		}
	}
}
