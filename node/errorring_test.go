package node

import (
	"log/slog"
	"testing"
)

// TestErrorRingCountsRepeats: a message logged again replaces its earlier
// entry with a count, so one failing dial repeated cannot push the other
// errors out of the status.
func TestErrorRingCountsRepeats(t *testing.T) {
	h := newErrorRing(slog.DiscardHandler)
	log := slog.New(h)
	log.Error("store: disk full")
	for i := range statusErrors + 5 {
		log.Warn("mesh: dial failed", "peer", i, "err", "line one\nline two")
	}
	log.Info("not kept")
	got := h.recent()
	if len(got) != 2 {
		t.Fatalf("kept %d entries, want 2: %+v", len(got), got)
	}
	if got[0].Message != "store: disk full" || got[0].Count != 1 {
		t.Fatalf("first entry %+v, want the disk error once", got[0])
	}
	if got[1].Message != "mesh: dial failed" || got[1].Count != statusErrors+5 || got[1].Attrs["peer"] != "24" {
		t.Fatalf("second entry %+v, want the dial error counted %d times with the latest attrs", got[1], statusErrors+5)
	}
}
