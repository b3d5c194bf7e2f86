package verify

import (
	"slices"
	"strconv"
	"testing"
)

// TestLifeCycle drives one identity through Plan, Judge and Record the
// way package compute does: it warms up beside a seasoned executor,
// runs alone once seasoned, lies when alone, is caught by an audit, its
// unchecked lies come back for re-check, and it warms up again.
func TestLifeCycle(t *testing.T) {
	p := DefaultPolicy()
	p.Explore = 1 // picks uniform: "n" gets work without standing
	// One audit rate, so that some lies pass before the catch and come
	// back for re-check.
	p.ProbationAudit = p.AuditRate
	pl := newPlanner(t, p, 9)
	season(pl, "old", 100000)
	cands := []Candidate{cand("n"), cand("old")}
	lying := false
	var lies []string
	caught := false
	for j := 0; j < 100000 && !caught; j++ {
		id := "job-" + strconv.Itoa(j)
		plan, err := pl.Plan(id, 1, cands, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(plan.Executors, "n") {
			continue
		}
		warm := pl.Ledger().Agreed("n") < p.WarmUp
		if warm != slices.Contains(plan.WarmUp, "n") || (warm && len(plan.Executors) != 2) {
			t.Fatalf("job %d: plan %+v with n at %d agreements", j, plan, pl.Ledger().Agreed("n"))
		}
		revs := map[string]Reveal{}
		for _, e := range plan.Executors {
			r := ok(1)
			if e == "n" && lying && len(plan.Executors) == 1 {
				r = ok(2)
			}
			revs[e] = reveal(id, e, r)
		}
		var audit *Result
		if plan.Audit {
			audit = &Result{Hash: hashOf(1)}
		}
		v := Judge(plan, revs, audit)
		ds := pl.Record(plan, v)
		switch {
		case len(ds) > 0:
			if len(ds) != 1 || ds[0].Executor != "n" || ds[0].Reason != ReasonMismatch || v.Hash != hashOf(1) {
				t.Fatalf("job %d: verdict %+v, disputes %+v", j, v, ds)
			}
			var rechecked []string
			for _, r := range ds[0].Recheck {
				if r.Hash == hashOf(2) {
					rechecked = append(rechecked, r.JobID)
				}
			}
			if !slices.Equal(rechecked, lies) {
				t.Fatalf("recheck lists lies %v, want %v", rechecked, lies)
			}
			caught = true
		case v.Hash == hashOf(2):
			lies = append(lies, id)
		}
		if !warm {
			lying = true // seasoned now: it starts to lie when alone
		}
	}
	if !caught || len(lies) == 0 {
		t.Fatalf("caught %v after %d accepted lies: want a catch after some (seed 9)", caught, len(lies))
	}
	if pl.Ledger().Agreed("n") != 0 || pl.Ledger().Executor("n").Losses != 1 {
		t.Fatalf("after the catch: %+v", pl.Ledger().Executor("n"))
	}
	t.Logf("caught after %d accepted lies", len(lies))
}

// TestPlannerConcurrent: plans, judgements and records from several
// goroutines at once (run under -race), and every agreement counted.
func TestPlannerConcurrent(t *testing.T) {
	p := DefaultPolicy()
	p.WarmUp = 0
	pl := newPlanner(t, p, 10)
	cands := []Candidate{cand("a"), cand("b"), cand("c")}
	const workers, jobs = 4, 300
	done := make(chan int, workers)
	for g := range workers {
		go func() {
			agreed := 0
			for j := range jobs {
				id := strconv.Itoa(g) + "-" + strconv.Itoa(j)
				plan, err := pl.Plan(id, 2, cands, standings{"a": 1})
				if err != nil {
					t.Error(err)
					break
				}
				revs := map[string]Reveal{}
				for _, e := range plan.Executors {
					revs[e] = reveal(id, e, ok(1))
				}
				v := Judge(plan, revs, nil)
				pl.Record(plan, v)
				agreed += len(v.Agreed)
			}
			done <- agreed
		}()
	}
	total := 0
	for range workers {
		total += <-done
	}
	sum := 0
	for _, c := range cands {
		sum += pl.Ledger().Agreed(c.DID)
	}
	if total != workers*jobs*2 || sum != total {
		t.Fatalf("agreements: %d in verdicts, %d in the ledger, want %d", total, sum, workers*jobs*2)
	}
}
