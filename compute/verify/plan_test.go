package verify

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// TestPlanErrors: bad policies and impossible plans are refused with
// errors naming the field or the figures.
func TestPlanErrors(t *testing.T) {
	bad := []func(*Policy){
		func(p *Policy) { p.AuditRate = 0 },
		func(p *Policy) { p.Explore = 0 },
		func(p *Policy) { p.ProbationAudit = p.AuditRate / 2 },
		func(p *Policy) { p.Redundancy = p.MaxRedundancy + 1 },
		func(p *Policy) { p.WarmUp = -1 },
		func(p *Policy) { p.Recent = 0 },
	}
	for i, f := range bad {
		p := DefaultPolicy()
		f(&p)
		if err := p.Validate(); !errors.Is(err, ErrPolicy) {
			t.Errorf("bad policy %d: Validate = %v, want ErrPolicy", i, err)
		}
	}
	pl := newPlanner(t, DefaultPolicy(), 1)
	shared := OperatorKey("ip4:203.0.113.0/24")
	cases := []struct {
		name  string
		want  int
		cands []Candidate
		err   error
	}{
		{"more than MaxRedundancy", 8, []Candidate{cand("a")}, ErrRedundancy},
		{"no candidates", 1, nil, ErrTooFewCandidates},
		{"only the home", 1, []Candidate{cand("home")}, ErrTooFewCandidates},
		{"two of one /24 for K=2", 2, []Candidate{cand("a", shared), cand("b", shared, "op:b")}, ErrTooFewCandidates},
		{"a repeated DID counts once", 2, []Candidate{cand("a"), cand("a")}, ErrTooFewCandidates},
	}
	for _, tc := range cases {
		if _, err := pl.Plan("j", tc.want, tc.cands, nil); !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}
}

// TestPlanRules: over many plans, the structural rules hold in each.
func TestPlanRules(t *testing.T) {
	shared := OperatorKey("ip6:2001:db8:1::/48")
	cands := []Candidate{
		cand("a", shared), cand("b", shared, "op:b"), cand("c"), cand("d"),
		cand("e", "op:e", "ip4:198.51.100.0/24"), cand("f", "ip4:198.51.100.0/24"),
		cand("fresh1"), cand("fresh2"), cand("home"),
	}
	op := map[string][]OperatorKey{}
	for _, c := range cands {
		op[c.DID] = c.Operators
	}
	st := standings{"a": 0.3, "b": 0.3, "c": 0.2, "d": 0.1, "e": 0.05, "f": 0.05}
	p := DefaultPolicy()
	pl := newPlanner(t, p, 2, "c")
	for _, d := range []string{"a", "b", "c", "d", "e", "f"} {
		season(pl, d, p.WarmUp)
	}
	for i := range 3000 {
		want := 1 + i%3
		plan, err := pl.Plan("j", want, cands, st)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Executors) < want {
			t.Fatalf("plan %v: fewer than %d executors", plan, want)
		}
		for x, e := range plan.Executors {
			if e == "home" {
				t.Fatalf("plan %v: the home runs a job it asked for", plan)
			}
			for _, f := range plan.Executors[x+1:] {
				if e == f || shares(op[e], op[f]) {
					t.Fatalf("plan %v: %s and %s share an operator", plan, e, f)
				}
			}
		}
		if len(plan.WarmUp) > 0 && len(plan.WarmUp) == len(plan.Executors) && !plan.Audit {
			t.Fatalf("plan %v: only warm-up executors and no audit", plan)
		}
		for _, w := range plan.WarmUp {
			if w != "fresh1" && w != "fresh2" {
				t.Fatalf("plan %v: %s listed in warm-up", plan, w)
			}
		}
		if plan.Audit != (plan.Auditor != "") || (plan.Audit && slices.Contains(plan.Executors, plan.Auditor)) {
			t.Fatalf("plan %v: bad auditor", plan)
		}
	}
}

// TestPlanWarmUp: a job given to a warm-up identity gets a seasoned
// executor beside it, or an audit when there is no seasoned one.
func TestPlanWarmUp(t *testing.T) {
	p := DefaultPolicy()
	p.Explore = 1 // uniform picks: the fresh one is picked often
	pl := newPlanner(t, p, 3)
	season(pl, "old", p.WarmUp)
	withFresh := 0
	for range 400 {
		plan, err := pl.Plan("j", 1, []Candidate{cand("new"), cand("old")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(plan.Executors, "new") {
			withFresh++
			if !slices.Equal(plan.Executors, []string{"new", "old"}) || !slices.Equal(plan.WarmUp, []string{"new"}) {
				t.Fatalf("plan %+v: want new with old beside it", plan)
			}
		}
	}
	if withFresh == 0 {
		t.Fatal("the fresh identity never got work with Explore 1")
	}
	// No seasoned candidate: every job is audited, by the home.
	pl = newPlanner(t, p, 4)
	for range 100 {
		plan, err := pl.Plan("j", 2, []Candidate{cand("x"), cand("y"), cand("z")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Audit || plan.Auditor != "home" || len(plan.Executors) != 2 || len(plan.WarmUp) != 2 {
			t.Fatalf("plan %+v: want two warm-up executors audited by the home", plan)
		}
	}
	// With WarmUp 0 everyone is seasoned from the start.
	p.WarmUp = 0
	pl = newPlanner(t, p, 5)
	plan, err := pl.Plan("j", 1, []Candidate{cand("x")}, nil)
	if err != nil || len(plan.WarmUp) != 0 || len(plan.Executors) != 1 {
		t.Fatalf("plan %+v, %v: want x alone, no warm-up", plan, err)
	}
}

// within fails unless k of n draws is within 5 standard deviations of
// rate p.
func within(t *testing.T, what string, k, n int, p float64) {
	t.Helper()
	sd := math.Sqrt(float64(n) * p * (1 - p))
	if math.Abs(float64(k)-float64(n)*p) > 5*sd {
		t.Errorf("%s: %d of %d, want about %.4f (±5 sd = %.0f)", what, k, n, p, 5*sd)
	}
}

// TestPlanAuditRates: audits never stop (an old executor is audited at
// AuditRate), a just-seasoned one at ProbationAudit, decaying with its
// agreements.
func TestPlanAuditRates(t *testing.T) {
	p := DefaultPolicy()
	pl := newPlanner(t, p, 6)
	season(pl, "old", 100000)
	season(pl, "probation", p.WarmUp)
	season(pl, "midway", 4*(p.WarmUp+1)-1)
	const n = 20000
	for _, tc := range []struct {
		did  string
		rate float64
	}{
		{"old", p.AuditRate},
		{"probation", p.ProbationAudit},
		{"midway", max(p.AuditRate, p.ProbationAudit/4)},
	} {
		if got := pl.AuditRate(tc.did); math.Abs(got-tc.rate) > 1e-12 {
			t.Errorf("AuditRate(%s) = %v, want %v", tc.did, got, tc.rate)
		}
		audited := 0
		for range n {
			plan, err := pl.Plan("j", 1, []Candidate{cand(tc.did)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Audit {
				audited++
			}
		}
		within(t, tc.did+" audited", audited, n, tc.rate)
	}
}

// TestPlanByStanding: picks go in proportion to standing, except a
// share Explore made uniformly; with no standing anywhere, uniformly.
func TestPlanByStanding(t *testing.T) {
	p := DefaultPolicy()
	p.WarmUp = 0
	pl := newPlanner(t, p, 7)
	cands := []Candidate{cand("rich"), cand("poor"), cand("none")}
	st := standings{"rich": 0.75, "poor": 0.25}
	const n = 20000
	count := map[string]int{}
	for range n {
		plan, err := pl.Plan("j", 1, cands, st)
		if err != nil {
			t.Fatal(err)
		}
		count[plan.Executors[0]]++
	}
	e := p.Explore
	within(t, "rich", count["rich"], n, e/3+(1-e)*0.75)
	within(t, "poor", count["poor"], n, e/3+(1-e)*0.25)
	within(t, "none (a stranger still gets work)", count["none"], n, e/3)
	clear(count)
	for range n {
		plan, _ := pl.Plan("j", 1, cands, nil)
		count[plan.Executors[0]]++
	}
	for _, d := range []string{"rich", "poor", "none"} {
		within(t, d+" with no standing", count[d], n, 1.0/3)
	}
}

// TestPlanAuditors: audits go to the home or a trusted auditor, never
// to an executor of the same job.
func TestPlanAuditors(t *testing.T) {
	p := DefaultPolicy()
	p.AuditRate, p.ProbationAudit, p.WarmUp = 1, 1, 0
	pl := newPlanner(t, p, 8, "t1", "t2")
	seen := map[string]int{}
	for range 3000 {
		plan, err := pl.Plan("j", 1, []Candidate{cand("t1"), cand("x")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Audit || slices.Contains(plan.Executors, plan.Auditor) {
			t.Fatalf("plan %+v: want an audit by someone else", plan)
		}
		seen[plan.Auditor]++
	}
	if len(seen) != 3 || seen["home"] == 0 || seen["t1"] == 0 || seen["t2"] == 0 {
		t.Fatalf("auditors %v: want home, t1 and t2", seen)
	}
}
