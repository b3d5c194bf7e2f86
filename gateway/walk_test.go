package gateway

import (
	"context"
	"fmt"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

// TestOutWalkPages walks a local store whose events crowd one second with
// more than a page of them, some sitting exactly at the second the walk
// starts from (the window's since) and some above it: every event at or
// below the start comes out exactly once, none above it, and the walk
// ends.
func TestOutWalkPages(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := nostr.GenerateSecretKey()
	want := map[[32]byte]bool{}
	add := func(createdAt int64, n int, wanted bool) {
		for i := range n {
			ev := makeEvent(t, k, createdAt, 1, fmt.Sprint(createdAt, " ", i), nil)
			if _, err := st.Save(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if wanted {
				want[ev.ID] = true
			}
		}
	}
	const start = 5000
	add(start+1, 5, false)           // above the window's since: the catch-up had them
	add(start, 3, true)              // at it
	add(start-1, fetchChunk+7, true) // a crowded second below it
	add(start-2, 4, true)
	for _, tc := range []struct {
		name string
		w    outWalk
		want int
	}{
		{"from the window's since", outWalk{until: start, bounded: true}, len(want)},
		{"from the newest", outWalk{}, len(want) + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w
			got := map[[32]byte]bool{}
			for steps := 0; !w.done; steps++ {
				if steps > 10 {
					t.Fatal("the walk does not end")
				}
				batch, err := w.next(context.Background(), st)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range batch {
					if got[ev.ID] {
						t.Fatalf("%q came out twice", ev.Content)
					}
					if tc.w.bounded && !want[ev.ID] {
						t.Fatalf("%q is above the start", ev.Content)
					}
					got[ev.ID] = true
				}
			}
			if len(got) != tc.want {
				t.Fatalf("the walk read %d events, want %d", len(got), tc.want)
			}
		})
	}
}
