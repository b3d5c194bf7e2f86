package gateway

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/internal/progress"
	"fleetmesh.org/fleetmesh/nostr"
)

// TestWalkEstimate checks the guess a since walk makes of what it has
// left: the density of the created_at seconds it has covered, applied to
// the rest of its window; one more page for a window without a start; none
// once a page comes short.
func TestWalkEstimate(t *testing.T) {
	const start = 1_800_000_000
	for _, tc := range []struct {
		name     string
		since    int64
		pages    []page // newest first
		full     []bool
		wantLeft int64
	}{
		{"a tenth of the window in one page", start - 10_000, []page{{n: 100, oldest: start - 1_000}}, []bool{true}, 900},
		{"half in two pages", start - 10_000, []page{{n: 100, oldest: start - 2_500}, {n: 100, oldest: start - 5_000}}, []bool{true, true}, 200},
		{"no start: one page more", 0, []page{{n: 100, oldest: start - 1_000}}, []bool{true}, 100},
		{"a short page ends it", start - 10_000, []page{{n: 100, oldest: start - 1_000}, {n: 7, oldest: start - 9_000}}, []bool{true, false}, 0},
		{"past since", start - 10_000, []page{{n: 100, oldest: start - 12_000}}, []bool{true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := progress.New("gateway", slog.New(slog.DiscardHandler), false)
			release := tr.Hold()
			defer release()
			w := &walk{t: tr, start: start, since: tc.since, pageSize: 100}
			moved := 0
			for i, p := range tc.pages {
				w.page(p, tc.full[i])
				moved += p.n
			}
			st := tr.Get()
			if st.Pending != tc.wantLeft || st.Moved != int64(moved) {
				t.Fatalf("moved %d with %d left, want %d with %d left", st.Moved, st.Pending, moved, tc.wantLeft)
			}
		})
	}
}

// syncBuffer is a log sink safe for the gateway's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCatchUpProgress fills a khatru backend with more events than the
// progress log's threshold, spread over a window of time, and starts a
// fresh gateway: with NIP-77 and by a since walk, its backend → mesh
// catch-up says how far it is in its log and its metric, and ends with
// every event counted.
func TestCatchUpProgress(t *testing.T) {
	const events = progress.LogMin + 200
	// Ten seconds apart, inside a window that starts just before the
	// oldest: the since walk can measure what it covered. Signed once for
	// both backends (signing is most of this test's time under -race).
	writer, _ := nostr.GenerateSecretKey()
	now := time.Now().Unix()
	var evs []*nostr.Event
	for i := range events {
		evs = append(evs, makeEvent(t, writer, now-int64(i)*10, 1, fmt.Sprintf("old note %d", i), nil))
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"negentropy", []string{"--negentropy"}},
		{"since", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backend := startKhatru(t, tc.flags...)
			dialClient(t, backend.url(), writer).publishAll(evs)
			var logs syncBuffer
			reg := prometheus.NewRegistry()
			g, _, _ := newTestGatewayLogged(t, slog.New(slog.NewTextHandler(&logs, nil)), reg, func(s *Settings) {
				s.Backend = backend.url()
				s.RetryMin, s.RetryMax = 20*time.Millisecond, 200*time.Millisecond
				s.ToMesh = []nostr.Filter{{Kinds: []int{1}, Since: now - events*10 - 5}}
				s.PageSize = 100
			})
			runGateway(t, g)
			ended := `msg="gateway: caught up" direction=to_mesh method=` + tc.name + " moved="
			deadline := time.Now().Add(backendDeadline)
			for !strings.Contains(logs.String(), ended) {
				if time.Now().After(deadline) {
					t.Fatalf("no %q line within %s:\n%s", ended, backendDeadline, logs.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			st := g.Progress()[dirToMesh]
			// A since walk asks again for the oldest second of each page,
			// so it may count a few events twice.
			if st.Active || st.Pending != 0 || st.Moved < events || st.Moved > events+events/50 || st.Rate <= 0 || st.Started.IsZero() {
				t.Fatalf("to_mesh progress after the catch-up: %+v (want %d events moved)", st, events)
			}
			out := logs.String()
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, `msg="gateway: catching up" direction=to_mesh`) {
					line = l
					break
				}
			}
			if line == "" || !strings.Contains(line, "of_about=") || !strings.Contains(line, "left=") {
				t.Fatalf("no progress line with an estimate and time left:\n%s", out)
			}
			// The first line's estimate is within a tenth of the truth
			// (NIP-77 knows it; the walk's events are evenly spread).
			var moved, about int64
			for _, f := range strings.Fields(line) {
				fmt.Sscanf(f, "moved=%d", &moved)
				fmt.Sscanf(f, "of_about=%d", &about)
			}
			if about < events*9/10 || about > events*11/10 || moved <= 0 || moved >= about {
				t.Fatalf("first progress line says %d of about %d; want a part of about %d:\n%s", moved, about, events, line)
			}
			// The other direction catches up beside this one: under load
			// it may end later.
			for !strings.Contains(logs.String(), `msg="gateway: caught up" direction=to_backend`) {
				if time.Now().After(deadline) {
					t.Fatalf("no to_backend catch-up ended within %s:\n%s", backendDeadline, logs.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			dirs := map[string]bool{}
			for _, f := range fams {
				if f.GetName() != "fleetmesh_gateway_catchup_pending_events" {
					continue
				}
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "direction" && m.GetGauge().GetValue() == 0 {
							dirs[l.GetValue()] = true
						}
					}
				}
			}
			if !dirs[dirToMesh] || !dirs[dirToBackend] {
				t.Fatalf("fleetmesh_gateway_catchup_pending_events at 0 for %v; want both directions", dirs)
			}
		})
	}
}

// publishAll sends every event without waiting for each OK, and fails the
// test unless the relay accepts them all: a quick fill of a backend.
func (c *client) publishAll(evs []*nostr.Event) {
	c.t.Helper()
	sent := make(chan struct{})
	go func() {
		// Owned by this call: it sends and ends; the reads below wait for
		// what it sent.
		defer close(sent)
		for _, ev := range evs {
			c.send(nostr.ClientMessage{Type: nostr.MsgEvent, Event: ev})
		}
	}()
	want := make(map[[32]byte]bool, len(evs))
	for _, ev := range evs {
		want[ev.ID] = true
	}
	for len(want) > 0 {
		m := c.next()
		if m.Type != nostr.MsgOK || !want[m.EventID] {
			continue
		}
		if !m.OK {
			c.t.Fatalf("the relay refused an event: %s", m.Text)
		}
		delete(want, m.EventID)
	}
	<-sent
}
