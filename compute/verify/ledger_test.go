package verify

import (
	"slices"
	"strconv"
	"testing"
)

func TestLedger(t *testing.T) {
	l := NewLedger(3, 100)
	for i := range 5 { // five unchecked results: the last three kept
		id := "u" + strconv.Itoa(i)
		v := Judge(Plan{JobID: id, Executors: []string{"a"}}, map[string]Reveal{"a": reveal(id, "a", ok(byte(i+1)))}, nil)
		l.Record(Plan{JobID: id}, v)
	}
	l.Record(Plan{JobID: "au"}, Verdict{Outcome: OK, Audited: true, Agreed: []string{"a", "b"}})
	l.Record(Plan{JobID: "rep"}, Verdict{Outcome: OK, Agreed: []string{"a"}})
	// A verdict that still needs its audit credits no one.
	l.Record(Plan{JobID: "pending"}, Verdict{Outcome: Inconclusive, NeedAudit: true, Reason: ReasonUnverified, Agreed: []string{"a"}})
	a := l.Executor("a")
	wantRecent := []JobRef{{"u2", hashOf(3)}, {"u3", hashOf(4)}, {"u4", hashOf(5)}}
	if a.Agreed != 2 || a.LastAudit != "au" || a.Losses != 0 || !slices.Equal(a.Recent, wantRecent) {
		t.Fatalf("a = %+v, want 2 agreed, last audit au, recent %v", a, wantRecent)
	}
	if b := l.Executor("b"); b.Agreed != 1 || b.LastAudit != "au" || len(b.Recent) != 0 {
		t.Fatalf("b = %+v", b)
	}
	// a loses: its agreements go to zero and its recent results come
	// back for re-check, once.
	ds := l.Record(Plan{JobID: "caught"}, Verdict{Outcome: OK, Audited: true, Agreed: []string{"b"},
		Disputes: []Dispute{{JobID: "caught", Executor: "a", Reason: ReasonMismatch}}})
	if len(ds) != 1 || ds[0].Executor != "a" || !slices.Equal(ds[0].Recheck, wantRecent) {
		t.Fatalf("disputes %+v: want a with recheck %v", ds, wantRecent)
	}
	if a := l.Executor("a"); a.Agreed != 0 || a.Losses != 1 || len(a.Recent) != 0 {
		t.Fatalf("a after losing = %+v", a)
	}
	ds = l.Record(Plan{JobID: "again"}, Verdict{Outcome: OK, Disputes: []Dispute{{Executor: "a", Reason: ReasonCommitment}}})
	if len(ds[0].Recheck) != 0 || l.Executor("a").Losses != 2 {
		t.Fatalf("second loss: %+v, %+v", ds, l.Executor("a"))
	}
	// A copy handed out does not alias the ledger.
	r := l.Executor("b")
	r.Recent = append(r.Recent, JobRef{JobID: "x"})
	if len(l.Executor("b").Recent) != 0 {
		t.Fatal("Executor's record aliases the ledger")
	}
}

// TestLedgerBound: at most MaxExecutors, the least recently seen
// forgotten first (it starts its warm-up again).
func TestLedgerBound(t *testing.T) {
	l := NewLedger(4, 3)
	for _, d := range []string{"a", "b", "c"} {
		l.Record(Plan{}, Verdict{Outcome: OK, Agreed: []string{d}})
	}
	l.Record(Plan{}, Verdict{Outcome: OK, Agreed: []string{"a"}}) // a seen again
	l.Record(Plan{}, Verdict{Outcome: OK, Agreed: []string{"d"}}) // b forgotten
	if l.Len() != 3 || l.Agreed("b") != 0 || l.Agreed("a") != 2 || l.Agreed("c") != 1 || l.Agreed("d") != 1 {
		t.Fatalf("len %d, agreed a=%d b=%d c=%d d=%d", l.Len(), l.Agreed("a"), l.Agreed("b"), l.Agreed("c"), l.Agreed("d"))
	}
}
