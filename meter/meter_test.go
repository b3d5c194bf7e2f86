package meter

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

func TestRecordAndRoll(t *testing.T) {
	start := time.Unix(7200+5, 0)
	m := New("self", time.Hour, start)
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
// Records), across peers counts as docs/benchmarks.md reports.
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
