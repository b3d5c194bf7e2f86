package verify

import (
	"slices"
	"testing"
)

func TestJudge(t *testing.T) {
	const job = "job-7"
	seasoned := func(ex ...string) Plan { return Plan{JobID: job, Executors: ex} }
	withWarm := func(warm []string, ex ...string) Plan {
		p := seasoned(ex...)
		p.WarmUp = warm
		return p
	}
	revs := func(kv ...any) map[string]Reveal {
		m := map[string]Reveal{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = reveal(job, kv[i].(string), kv[i+1].(Result))
		}
		return m
	}
	audit := func(r Result) *Result { return &r }
	copier := revs("c", ok(1))
	{ // c committed to a guess, then revealed the hash it saw from a.
		rv := copier["c"]
		rv.Commitment = Commit(job, "c", ok(0), rv.Nonce)
		copier["c"] = rv
	}
	copier["a"] = reveal(job, "a", ok(1))
	type dispute struct{ who, reason string }
	cases := []struct {
		name      string
		plan      Plan
		reveals   map[string]Reveal
		audit     *Result
		outcome   Outcome
		hash      byte // 0: none
		reason    string
		needAudit bool
		agreed    []string
		unchecked []string
		disputes  []dispute
	}{
		{name: "one seasoned executor, unaudited", plan: seasoned("a"), reveals: revs("a", ok(1)),
			outcome: OK, hash: 1, unchecked: []string{"a"}},
		{name: "two agree", plan: seasoned("a", "b"), reveals: revs("a", ok(1), "b", ok(1)),
			outcome: OK, hash: 1, agreed: []string{"a", "b"}},
		{name: "all inconclusive", plan: seasoned("a", "b"), reveals: revs("a", stopped("out_of_fuel"), "b", stopped("deadline")),
			outcome: Inconclusive, reason: "out_of_fuel"},
		{name: "all inconclusive, audit inconclusive too", plan: seasoned("a"), reveals: revs("a", stopped("stack_exhausted")), audit: audit(stopped("stack_exhausted")),
			outcome: Inconclusive, reason: "stack_exhausted"},
		{name: "no reveals", plan: seasoned("a", "b"), reveals: revs(),
			outcome: Inconclusive, reason: ReasonNoResult},
		{name: "one inconclusive, one result", plan: seasoned("a", "b"), reveals: revs("a", stopped("out_of_memory"), "b", ok(2)),
			outcome: OK, hash: 2, unchecked: []string{"b"}},
		{name: "2-vs-1 split, no audit: no vote", plan: seasoned("a", "b", "c"), reveals: revs("a", ok(1), "b", ok(1), "c", ok(2)),
			outcome: Disagreement, needAudit: true},
		{name: "2-vs-1 split, audit sides with the two", plan: seasoned("a", "b", "c"), reveals: revs("a", ok(1), "b", ok(1), "c", ok(2)), audit: audit(ok(1)),
			outcome: OK, hash: 1, agreed: []string{"a", "b"}, disputes: []dispute{{"c", ReasonMismatch}}},
		{name: "2-vs-1 split, audit sides with the one (colluding pair)", plan: seasoned("a", "b", "c"), reveals: revs("a", ok(1), "b", ok(1), "c", ok(2)), audit: audit(ok(2)),
			outcome: OK, hash: 2, agreed: []string{"c"}, disputes: []dispute{{"a", ReasonMismatch}, {"b", ReasonMismatch}}},
		{name: "colluding copies, same wrong hash, unaudited: accepted (the stated limit)", plan: seasoned("a", "b"), reveals: revs("a", ok(9), "b", ok(9)),
			outcome: OK, hash: 9, agreed: []string{"a", "b"}},
		{name: "colluding copies, same wrong hash, audited", plan: seasoned("a", "b"), reveals: revs("a", ok(9), "b", ok(9)), audit: audit(ok(1)),
			outcome: OK, hash: 1, disputes: []dispute{{"a", ReasonMismatch}, {"b", ReasonMismatch}}},
		{name: "auditor disagrees with every executor", plan: seasoned("a", "b"), reveals: revs("a", ok(1), "b", ok(1)), audit: audit(ok(3)),
			outcome: OK, hash: 3, disputes: []dispute{{"a", ReasonMismatch}, {"b", ReasonMismatch}}},
		{name: "audit inconclusive: the executors decide", plan: seasoned("a", "b"), reveals: revs("a", ok(1), "b", ok(2)), audit: audit(stopped("deadline")),
			outcome: Disagreement, needAudit: true},
		{name: "audit settles an all-inconclusive job, no one blamed", plan: seasoned("a"), reveals: revs("a", stopped("deadline")), audit: audit(ok(4)),
			outcome: OK, hash: 4},
		{name: "lazy copier", plan: seasoned("a", "c"), reveals: copier,
			outcome: OK, hash: 1, unchecked: []string{"a"}, disputes: []dispute{{"c", ReasonCommitment}}},
		{name: "warm-up result alone, seasoned inconclusive", plan: withWarm([]string{"n"}, "n", "a"), reveals: revs("n", ok(1), "a", stopped("deadline")),
			outcome: Inconclusive, reason: ReasonUnverified, needAudit: true},
		{name: "two warm-up Sybils agree: unverified", plan: withWarm([]string{"n", "m"}, "n", "m"), reveals: revs("n", ok(9), "m", ok(9)),
			outcome: Inconclusive, reason: ReasonUnverified, needAudit: true},
		{name: "warm-up checked by seasoned", plan: withWarm([]string{"n"}, "n", "a"), reveals: revs("n", ok(1), "a", ok(1)),
			outcome: OK, hash: 1, agreed: []string{"n", "a"}},
		{name: "warm-up checked by audit", plan: withWarm([]string{"n"}, "n"), reveals: revs("n", ok(1)), audit: audit(ok(1)),
			outcome: OK, hash: 1, agreed: []string{"n"}},
		{name: "reveal from outside the plan ignored", plan: seasoned("a"), reveals: revs("a", ok(1), "z", ok(2)),
			outcome: OK, hash: 1, unchecked: []string{"a"}},
	}
	for _, tc := range cases {
		v := Judge(tc.plan, tc.reveals, tc.audit)
		var want [32]byte
		if tc.hash != 0 {
			want = hashOf(tc.hash)
		}
		var ds []dispute
		for _, d := range v.Disputes {
			ds = append(ds, dispute{d.Executor, d.Reason})
			if d.JobID != job {
				t.Errorf("%s: dispute %+v: job %q", tc.name, d, d.JobID)
			}
		}
		if v.Outcome != tc.outcome || v.Hash != want || v.Reason != tc.reason || v.NeedAudit != tc.needAudit ||
			!slices.Equal(v.Agreed, tc.agreed) || !slices.Equal(v.Unchecked, tc.unchecked) || !slices.Equal(ds, tc.disputes) {
			t.Errorf("%s:\n got %+v (disputes %v)\nwant outcome %s hash %d reason %q needAudit %v agreed %v unchecked %v disputes %v",
				tc.name, v, ds, tc.outcome, tc.hash, tc.reason, tc.needAudit, tc.agreed, tc.unchecked, tc.disputes)
		}
		if v.Audited != (tc.audit != nil && tc.audit.Conclusive()) {
			t.Errorf("%s: Audited = %v", tc.name, v.Audited)
		}
	}
}
