package progress

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// clocked is a tracker on a clock the test moves, logging into a buffer.
func clocked() (*Tracker, *time.Time, *bytes.Buffer) {
	now := time.Unix(1_700_000_000, 0)
	var logs bytes.Buffer
	t := New("meshsync", slog.New(slog.NewTextHandler(&logs, nil)), true)
	t.now = func() time.Time { return now }
	return t, &now, &logs
}

func TestTracker(t *testing.T) {
	p, now, logs := clocked()
	if st := p.Get(); st.Active || st.Total != 0 || st.Rate != 0 {
		t.Fatalf("before any catch-up: %+v", st)
	}

	// Two sessions find 3,000 and 1,000 missing ids.
	p.Found(3000)
	p.Found(1000)
	*now = now.Add(10 * time.Second)
	p.Resolved(500)
	st := p.Get()
	if !st.Active || st.Pending != 3500 || st.Moved != 500 || st.Total != 4000 {
		t.Fatalf("mid catch-up: %+v", st)
	}
	if st.Rate != 50 || st.Left != 70*time.Second {
		t.Fatalf("rate %v, left %v; want 50/s and 70s", st.Rate, st.Left)
	}
	if !strings.Contains(logs.String(), "meshsync: catching up") || !strings.Contains(logs.String(), "of_about=4000") {
		t.Fatalf("no progress line for a large catch-up:\n%s", logs.String())
	}

	// Lines are spaced: another chunk a second later logs nothing.
	logs.Reset()
	*now = now.Add(time.Second)
	p.Resolved(500)
	if logs.Len() != 0 {
		t.Fatalf("a progress line within %s of the last:\n%s", LogEvery, logs.String())
	}

	// The rest resolves (one session fails and gives its ids up): the
	// catch-up ends, is logged once, and keeps its figures until the next.
	*now = now.Add(9 * time.Second)
	p.Resolved(3000)
	st = p.Get()
	if st.Active || st.Pending != 0 || st.Moved != 4000 || st.Elapsed != 20*time.Second || st.Left != 0 {
		t.Fatalf("after the catch-up: %+v", st)
	}
	if strings.Count(logs.String(), "meshsync: caught up") != 1 {
		t.Fatalf("want one line at the end of a large catch-up:\n%s", logs.String())
	}
	*now = now.Add(time.Hour)
	if got := p.Get(); got.Elapsed != 20*time.Second {
		t.Fatalf("a finished catch-up's elapsed time grew: %v", got.Elapsed)
	}

	// Resolving after the end changes nothing.
	p.Resolved(5)
	if st := p.Get(); st.Pending != 0 || st.Moved != 4000 {
		t.Fatalf("resolved after the end: %+v", st)
	}

	// A small one starts afresh and logs nothing.
	logs.Reset()
	p.Found(10)
	p.Resolved(10)
	if st := p.Get(); st.Total != 10 || st.Active || logs.Len() != 0 {
		t.Fatalf("a small catch-up: %+v, logged %q", st, logs.String())
	}
}

// TestTrackerHold: a catch-up that finds its work a step at a time stays
// one catch-up while held, and ends when released.
func TestTrackerHold(t *testing.T) {
	p, now, logs := clocked()
	release := p.Hold()
	if st := p.Get(); !st.Active || st.Total != 0 {
		t.Fatalf("held with nothing found: %+v", st)
	}
	for range 3 { // three filters, each reconciled then fetched
		p.Found(600)
		*now = now.Add(2 * time.Second)
		p.Resolved(600)
		if st := p.Get(); !st.Active {
			t.Fatalf("the catch-up ended between steps while held: %+v", st)
		}
	}
	if st := p.Get(); st.Moved != 1800 || st.Rate != 300 {
		t.Fatalf("after three steps: %+v", st)
	}
	release()
	release() // safe twice
	st := p.Get()
	if st.Active || st.Moved != 1800 || st.Elapsed != 6*time.Second {
		t.Fatalf("released: %+v", st)
	}
	if strings.Count(logs.String(), "caught up") != 1 {
		t.Fatalf("want one end line:\n%s", logs.String())
	}
}

// TestTrackerEstimate: a walk whose size shows as it goes replaces its
// guess of what is left; outside a catch-up a guess is ignored.
func TestTrackerEstimate(t *testing.T) {
	p, now, _ := clocked()
	p.Estimate(500)
	if st := p.Get(); st.Active || st.Pending != 0 {
		t.Fatalf("an estimate started a catch-up: %+v", st)
	}
	release := p.Hold()
	p.Found(100)
	*now = now.Add(time.Second)
	p.Resolved(100)
	p.Estimate(900)
	if st := p.Get(); st.Total != 1000 || st.Left != 9*time.Second {
		t.Fatalf("after a page and a guess of 900 more: %+v", st)
	}
	p.Estimate(-3)
	if st := p.Get(); st.Pending != 0 || !st.Active {
		t.Fatalf("a negative guess: %+v", st)
	}
	release()
	if st := p.Get(); st.Active || st.Total != 100 {
		t.Fatalf("released: %+v", st)
	}
}

// TestTrackerGiveUp: a catch-up whose work failed ends without its
// pending items, and says it stopped rather than caught up.
func TestTrackerGiveUp(t *testing.T) {
	p, now, logs := clocked()
	release := p.Hold()
	p.Found(5000)
	*now = now.Add(time.Second)
	p.Resolved(1000)
	p.GiveUp()
	if st := p.Get(); !st.Active || st.Pending != 0 || st.Moved != 1000 {
		t.Fatalf("given up while held: %+v", st)
	}
	release()
	if st := p.Get(); st.Active || st.Total != 1000 {
		t.Fatalf("given up and released: %+v", st)
	}
	if !strings.Contains(logs.String(), "meshsync: catch-up stopped") || strings.Contains(logs.String(), "caught up") {
		t.Fatalf("want a stopped line and no caught-up line:\n%s", logs.String())
	}
	// The next one is a fresh catch-up that can end well.
	logs.Reset()
	p.Found(2000)
	p.Resolved(2000)
	if !strings.Contains(logs.String(), "meshsync: caught up") {
		t.Fatalf("the next catch-up did not end well:\n%s", logs.String())
	}
}

// TestTrackerOwnerLogsEnd: with logEnd false, a large catch-up logs its
// progress but leaves its end line to the owner.
func TestTrackerOwnerLogsEnd(t *testing.T) {
	p, now, logs := clocked()
	p.logEnd = false
	p.Found(3000)
	*now = now.Add(time.Second)
	p.Resolved(1000)
	p.Resolved(2000)
	if !strings.Contains(logs.String(), "catching up") || strings.Contains(logs.String(), "caught up") {
		t.Fatalf("want a progress line and no end line:\n%s", logs.String())
	}
}
