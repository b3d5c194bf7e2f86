package meter

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/receipt"
)

func TestRecordAndRoll(t *testing.T) {
	start := time.Unix(7200+5, 0)
	m := New("self", time.Hour, start)
	m.SetClock(func() time.Time { return start })
	if m.Current().Start != 7200 {
		t.Fatalf("window start %d, want 7200 (UTC-aligned)", m.Current().Start)
	}
	m.Record("p", Events, Gave, 3)
	m.Record("p", Bytes, Received, 100)
	m.Record("self", Events, Gave, 9) // never counted
	if m.Used("p", Events) != 3 {
		t.Fatal("Used")
	}
	if m.Roll(7200) != nil {
		t.Fatal("rolled to the same window")
	}
	old := m.Roll(10800)
	sides := old.Sides()
	if len(sides) != 1 || sides["p"].Gave.Events != 3 || sides["p"].Received.Bytes != 100 {
		t.Fatalf("closed window: %+v", sides)
	}
	if m.Used("p", Events) != 0 {
		t.Fatal("the new window starts empty")
	}
	var nilMeter *Meter
	nilMeter.Record("p", Events, Gave, 1) // no panic
}

// TestCountAfterBoundaryRolls: a count made once the clock has passed the
// open window's end, before anything rolled it (Run's timer late, the
// accounting loop not yet started), lands in the window of its time, and
// the window before closes with only what was counted in it.
func TestCountAfterBoundaryRolls(t *testing.T) {
	clock := time.Unix(7200+3590, 0)
	m := New("self", time.Hour, clock)
	m.SetClock(func() time.Time { return clock })
	m.Record("p", Events, Gave, 1)
	clock = time.Unix(10800+2, 0)
	m.Event("p", Received, []byte(`{"id":"`+strings.Repeat("ab", 32)+`"}`))
	m.Record("p", Events, Gave, 5)
	if m.Current().Start != 10800 {
		t.Fatalf("open window %d after a count at 10802, want 10800", m.Current().Start)
	}
	closed := m.TakeClosed()
	if len(closed) != 1 || closed[0].Start != 7200 {
		t.Fatalf("closed windows %v, want the one of 7200", closed)
	}
	if s := closed[0].Sides()["p"]; s.Gave.Events != 1 || s.Received.Events != 0 {
		t.Fatalf("window 7200 holds %+v, want the one event given before the boundary", s)
	}
	if s := m.Current().Sides()["p"]; s.Gave.Events != 5 || s.Received.Events != 1 {
		t.Fatalf("window 10800 holds %+v", s)
	}
	clock = time.Unix(14400, 0)
	if m.Used("p", Events) != 0 {
		t.Fatal("a grant's use after a boundary still counts the window before")
	}
}

// TestRecordAt: a count at an agreed time lands in that time's window
// while the window is open or closed but unsealed, and in the open window
// once it is sealed, before the meter's oldest window or after the open
// one began; a meter nothing seals keeps at most maxUnsealed windows
// open to it.
func TestRecordAt(t *testing.T) {
	clock := time.Unix(7200+3599, 0)
	m := New("self", time.Hour, clock)
	m.SetClock(func() time.Time { return clock })
	at := clock // the executor's stamp, a second before the boundary
	clock = time.Unix(10800+1, 0)
	m.Roll(10800)
	closed := m.TakeClosed()[0]
	tests := []struct {
		name string
		at   time.Time
		seal bool
		want int64
	}{
		{"in the open window", time.Unix(10800+1, 0), false, 10800},
		{"in the closed unsealed window", at, false, 7200},
		{"in the future: the open window", time.Unix(14400+5, 0), false, 10800},
		{"before any window kept: the open window", time.Unix(5, 0), false, 10800},
		{"in the closed window once sealed: the open window", at, true, 10800},
	}
	for _, tt := range tests {
		if tt.seal {
			m.Seal(closed)
		}
		if got := m.RecordAt("p", ComputeUnits, Received, 800, tt.at); got != tt.want {
			t.Errorf("%s: counted in %d, want %d", tt.name, got, tt.want)
		}
	}
	if s := closed.Sides()["p"]; s.Received.ComputeUnits != 800 {
		t.Fatalf("the closed window holds %d units, want 800", s.Received.ComputeUnits)
	}
	if s := m.Current().Sides()["p"]; s.Received.ComputeUnits != 4*800 {
		t.Fatalf("the open window holds %d units, want 3200", s.Received.ComputeUnits)
	}
	if m.RecordAt("self", ComputeUnits, Received, 1, at) != 0 || m.RecordAt("p", ComputeUnits, Received, 0, at) != 0 {
		t.Fatal("counted service with itself, or nothing")
	}
	for i := range 2 * maxUnsealed {
		m.Roll(10800 + int64(i+1)*3600)
	}
	m.unsealedMu.Lock()
	n := len(m.unsealed)
	m.unsealedMu.Unlock()
	if n != maxUnsealed {
		t.Fatalf("%d unsealed windows kept, want %d", n, maxUnsealed)
	}
}

func TestParseService(t *testing.T) {
	for _, n := range Names() {
		s, ok := ParseService(n)
		if !ok || s.String() != n {
			t.Fatalf("%s", n)
		}
	}
	if _, ok := ParseService("nope"); ok {
		t.Fatal("unknown service parsed")
	}
}

// BenchmarkRecord is the hot-path cost of metering one event (two
// Records), across peers counts as docs/benchmarks/accounting.md reports.
func BenchmarkRecord(b *testing.B) {
	for _, peers := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint(peers), func(b *testing.B) {
			m := New("self", time.Hour, time.Now())
			ids := make([]peer.ID, peers)
			for i := range ids {
				ids[i] = peer.ID(fmt.Sprintf("peer-%d", i))
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					p := ids[i%peers]
					m.Record(p, Events, Gave, 1)
					m.Record(p, Bytes, Gave, 300)
					i++
				}
			})
		})
	}
}

// FuzzServiceText checks that a service read from text is one of the
// services and writes back as the same text.
func FuzzServiceText(f *testing.F) {
	for _, s := range append(Names(), "", "unknown", "Events", "events ") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var svc Service
		if err := svc.UnmarshalText([]byte(s)); err != nil {
			return
		}
		b, err := svc.MarshalText()
		if err != nil || string(b) != s {
			t.Fatalf("%q read as %d, written %q (%v)", s, svc, b, err)
		}
	})
}

// TestSpanSplitsAtBoundaries: a span's seconds go to the windows they
// fall in, the fraction carried over, and End counts the rest once.
func TestSpanSplitsAtBoundaries(t *testing.T) {
	clock := time.Unix(3600, 0)
	m := New("self", 10*time.Second, clock)
	m.now = func() time.Time { return clock }
	clock = clock.Add(2500 * time.Millisecond) // 3602.5
	sp := m.Start("p", CircuitSeconds, Gave)
	if m.Start("self", CircuitSeconds, Gave) != nil {
		t.Fatal("a span with self")
	}
	w1 := m.Roll(3610) // 7.5 s in the first window: 7 counted, 0.5 carried
	clock = time.Unix(3613, 0)
	sp.End() // 3.5 s in the second
	sp.End()
	if got := w1.Sides()["p"].Gave.CircuitSeconds; got != 7 {
		t.Fatalf("first window: %d seconds, want 7", got)
	}
	if got := m.Current().Sides()["p"].Gave.CircuitSeconds; got != 3 {
		t.Fatalf("second window: %d seconds, want 3 (3.5 with the carried half, floored)", got)
	}
	var nilSpan *Span
	nilSpan.End()
}

// TestStop: at a stop the open spans end into the open window, and the
// windows rolled but not taken come back before the open one, so the
// caller saves every figure counted so far, oldest window first.
func TestStop(t *testing.T) {
	clock := time.Unix(3600, 0)
	m := New("self", 10*time.Second, clock)
	m.SetClock(func() time.Time { return clock })
	sp := m.Start("p", CircuitSeconds, Gave)
	m.Record("p", Events, Received, 2)
	clock = time.Unix(3612, 0)
	m.Record("p", Events, Received, 5) // rolls the first window
	clock = time.Unix(3616, 0)
	ws := m.Stop()
	if len(ws) != 2 || ws[0].Start != 3600 || ws[1].Start != 3610 {
		t.Fatalf("Stop returned %d windows: want the rolled one (3600) and the open one (3610)", len(ws))
	}
	if got := ws[0].Sides()["p"]; got.Received.Events != 2 || got.Gave.CircuitSeconds != 10 {
		t.Errorf("the rolled window: %+v, want 2 events received and 10 circuit seconds", got)
	}
	if got := ws[1].Sides()["p"]; got.Received.Events != 5 || got.Gave.CircuitSeconds != 6 {
		t.Errorf("the open window: %+v, want 5 events received and the span's last 6 seconds", got)
	}
	if len(m.TakeClosed()) != 0 {
		t.Error("Stop left rolled windows to take")
	}
	sp.End() // already ended: counts nothing more
	if got := ws[1].Sides()["p"].Gave.CircuitSeconds; got != 6 {
		t.Errorf("a span ended twice counted again: %d seconds", got)
	}
}

// TestEventEvidence: the events counted each way carry a digest and a
// bottom-k sample that two meters counting the same events agree on, in
// whatever order they count them.
func TestEventEvidence(t *testing.T) {
	a, b := New("a", time.Hour, time.Now()), New("b", time.Hour, time.Now())
	var evs [][]byte
	for i := range 100 {
		evs = append(evs, []byte(fmt.Sprintf(`{"id":"%016x%048x","pubkey":""}`, uint64(i)*0x9e3779b97f4a7c15, 0)))
	}
	for i, js := range evs {
		a.Event("b", Gave, js)
		b.Event("a", Received, evs[len(evs)-1-i])
	}
	b.Event("a", Received, []byte(`["not an event"]`)) // counted, not keyed
	ea, eb := a.Current().Evidence("b"), b.Current().Evidence("a")
	if ea.Gave.Digest != eb.Received.Digest || len(ea.Gave.Sample) != receipt.SampleSize {
		t.Fatalf("digests %s and %s, sample %d", ea.Gave.Digest, eb.Received.Digest, len(ea.Gave.Sample))
	}
	if fmt.Sprint(ea.Gave.Sample) != fmt.Sprint(eb.Received.Sample) || ea.Gave.Events != 100 || eb.Received.Events != 100 {
		t.Fatalf("samples differ: %v / %v", ea.Gave.Sample, eb.Received.Sample)
	}
	if err := ea.Check(); err != nil {
		t.Fatal(err)
	}
	if s := b.Current().Sides()["a"]; s.Received.Events != 101 {
		t.Fatalf("received %d events, want 101", s.Received.Events)
	}
	if miss := receipt.Missing(ea.Gave, eb.Received); len(miss) != 0 {
		t.Fatalf("missing %v", miss)
	}
}

// BenchmarkEvent is the hot-path cost of metering one forwarded event
// with its evidence.
func BenchmarkEvent(b *testing.B) {
	m := New("self", time.Hour, time.Now())
	ids := make([]peer.ID, 100)
	for i := range ids {
		ids[i] = peer.ID(fmt.Sprintf("peer-%d", i))
	}
	// Distinct events, as a window's traffic is.
	evs := make([][]byte, 4096)
	for i := range evs {
		evs[i] = []byte(fmt.Sprintf(`{"id":"%016x%048x","pubkey":"","content":"%s"}`, uint64(i+1)*0x9e3779b97f4a7c15, 0, strings.Repeat("x", 200)))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Event(ids[i%len(ids)], Gave, evs[i%len(evs)])
			i++
		}
	})
}

// TestRunRollsAtBoundaries: Run rolls at each boundary of the clock, and
// TakeClosed hands over the closed windows once.
func TestRunRollsAtBoundaries(t *testing.T) {
	m := New("self", time.Second, time.Now())
	first := m.Current().Start
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	var closed []*Window
	for len(closed) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d windows closed", len(closed))
		}
		closed = append(closed, m.TakeClosed()...)
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if closed[0].Start != first || closed[1].Start != first+1 {
		t.Fatalf("closed windows %d, %d after %d", closed[0].Start, closed[1].Start, first)
	}
}
