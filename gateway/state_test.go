package gateway

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

func TestStateFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st := stateFile{path: filepath.Join(dir, StateFile)}
	c, err := st.load()
	if err != nil || c != (Cursors{}) {
		t.Fatalf("missing file: %+v %v", c, err)
	}
	want := Cursors{In: 1700000000, Out: 1700000100}
	if err := st.save(want); err != nil {
		t.Fatal(err)
	}
	if got, err := st.load(); err != nil || got != want {
		t.Fatalf("load = %+v %v, want %+v", got, err, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	os.WriteFile(st.path, []byte("{"), 0o600)
	if _, err := st.load(); err == nil {
		t.Fatal("corrupt state accepted")
	}
}

func TestWatermark(t *testing.T) {
	w := newWatermark(1000)
	a, b := [32]byte{1}, [32]byte{2}
	steps := []struct {
		do   func()
		want int64
	}{
		{func() {}, 1000},
		{func() { w.add(a, 500) }, 500},            // pending holds the cursor back
		{func() { w.add(b, 2000) }, 500},           // a newer pending does not
		{func() { w.done(a) }, 1000},               // settled
		{func() { w.complete(3000) }, 2000},        // b still pending
		{func() { w.done(b) }, 3000},               // all settled
		{func() { w.drop([32]byte{3}, 100) }, 100}, // a drop reaches back
		{func() {
			if got := w.start(); got != 100 {
				t.Fatalf("start = %d, want the dropped 100", got)
			}
		}, 3000}, // the catch-up covers the drop
		{func() { w.add(a, 10); w.add(a, 10); w.done(a) }, 10}, // counted twice, settled once
		{func() { w.done(a) }, 3000},
	}
	for i, s := range steps {
		s.do()
		if got := w.value(); got != s.want {
			t.Fatalf("step %d: value %d, want %d", i, got, s.want)
		}
	}
	if w.hasDropped() {
		t.Fatal("drop not cleared by start")
	}
	if w.dropped != math.MaxInt64 {
		t.Fatal("dropped not reset")
	}
}

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 2*time.Second
	for failures := range 12 {
		step := lo
		for i := 0; i < failures && step < hi; i++ {
			step *= 2
		}
		step = min(step, hi)
		for range 50 {
			d := backoff(lo, hi, failures)
			if d < step/2 || d > step {
				t.Fatalf("failures %d: %s outside [%s, %s]", failures, d, step/2, step)
			}
		}
	}
}

func TestQueueBoundAndDedupe(t *testing.T) {
	q := newQueue(2)
	e1, e2, e3 := signedEvent(t), signedEvent(t), signedEvent(t)
	e2.ID[0] ^= 1
	e3.ID[0] ^= 2
	if ok, full := q.push(e1); !ok || full {
		t.Fatal("first push")
	}
	if ok, full := q.push(e1); ok || full {
		t.Fatal("duplicate queued")
	}
	q.push(e2)
	if ok, full := q.push(e3); ok || !full {
		t.Fatal("bound not enforced")
	}
	got, err := q.peek(t.Context())
	if err != nil || got != e1 {
		t.Fatal("peek is not FIFO")
	}
	q.remove(e1)
	if q.len() != 1 {
		t.Fatal("remove")
	}
	if ok, _ := q.push(e1); !ok {
		t.Fatal("a delivered event could not be queued again")
	}
}

func signedEvent(t testing.TB) *nostr.Event {
	t.Helper()
	seed := make([]byte, 32)
	seed[31] = 7
	k, err := nostr.SecretKeyFromBytes(seed)
	if err != nil {
		t.Fatal(err)
	}
	ev := &nostr.Event{CreatedAt: 1700000000, Kind: 1, Tags: nostr.Tags{{"t", "x"}}, Content: "hello"}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}
