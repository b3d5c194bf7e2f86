package meshsync

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	p := &progress{now: func() time.Time { return now }}
	if st := p.get(); st.Active || st.Total != 0 || st.Rate != 0 {
		t.Fatalf("before any sync: %+v", st)
	}

	// Two sessions find 3,000 and 1,000 missing ids.
	p.found(3000)
	p.found(1000)
	now = now.Add(10 * time.Second)
	p.resolved(500, log)
	st := p.get()
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
	now = now.Add(time.Second)
	p.resolved(500, log)
	if logs.Len() != 0 {
		t.Fatalf("a progress line within %s of the last:\n%s", progressLogEvery, logs.String())
	}

	// The rest resolves (one session fails and gives its ids up): the
	// catch-up ends, is logged, and keeps its figures until the next.
	now = now.Add(9 * time.Second)
	p.resolved(3000, log)
	st = p.get()
	if st.Active || st.Pending != 0 || st.Moved != 4000 || st.Elapsed != 20*time.Second || st.Left != 0 {
		t.Fatalf("after the catch-up: %+v", st)
	}
	if !strings.Contains(logs.String(), "meshsync: caught up") {
		t.Fatalf("no line at the end of a large catch-up:\n%s", logs.String())
	}
	now = now.Add(time.Hour)
	if got := p.get(); got.Elapsed != 20*time.Second {
		t.Fatalf("a finished catch-up's elapsed time grew: %v", got.Elapsed)
	}

	// A small one starts afresh and logs nothing.
	logs.Reset()
	p.found(10)
	p.resolved(10, log)
	if st := p.get(); st.Total != 10 || st.Active || logs.Len() != 0 {
		t.Fatalf("a small catch-up: %+v, logged %q", st, logs.String())
	}
	// Resolving more than is pending never goes negative.
	p.resolved(5, log)
	if st := p.get(); st.Pending != 0 {
		t.Fatalf("pending %d", st.Pending)
	}
}
