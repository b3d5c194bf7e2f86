package verify

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"fleetmesh.org/fleetmesh/standing"
)

// Plan says who runs one job: the executors (never two sharing an
// operator key), which of them are still in their warm-up, and whether
// the requester audits it and who runs the audit.
type Plan struct {
	JobID string
	// Executors run the job, in the order they were picked.
	Executors []string
	// WarmUp lists the executors that have not yet had WarmUp checked
	// agreements. A plan with any has a seasoned executor beside them or
	// an audit.
	WarmUp []string
	// Audit is set when the requester re-runs the job itself (or has
	// Auditor run it) and judges the executors against that run. The
	// executors must not learn it: the audit is decided here, secretly,
	// and run whatever they reveal.
	Audit bool
	// Auditor is who runs the audit: the requester's own node (the
	// Planner's home) or an executor it trusts. Empty when Audit is not
	// set.
	Auditor string
}

// inWarmUp reports whether did is one of the plan's warm-up executors.
func (p Plan) inWarmUp(did string) bool {
	for _, w := range p.WarmUp {
		if w == did {
			return true
		}
	}
	return false
}

// Errors Plan returns; each is wrapped with the figures.
var (
	ErrRedundancy       = errors.New("verify: redundancy out of range")
	ErrTooFewCandidates = errors.New("verify: too few candidates with distinct operators")
)

// Planner picks the executors of jobs and decides their audits for one
// requester, and keeps its Ledger. It is safe for concurrent use.
//
// The random source decides audits: executors must not be able to
// predict it, so outside tests seed it from crypto/rand
// (rand.New(rand.NewChaCha8(seed))).
type Planner struct {
	policy   Policy
	home     string
	auditors []string
	ledger   *Ledger

	mu  sync.Mutex
	rng *rand.Rand
}

// NewPlanner makes a Planner for the requester whose node's DID is home
// (its own node runs audits and can always run a job itself); auditors
// are executors it trusts to run audits too (may be empty). rng decides
// picks and audits.
func NewPlanner(p Policy, home string, auditors []string, rng *rand.Rand) (*Planner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if home == "" {
		return nil, errors.New("verify: NewPlanner needs home, the requester's own DID (it runs audits)")
	}
	if rng == nil {
		return nil, errors.New("verify: NewPlanner needs a random source (seeded from crypto/rand outside tests)")
	}
	return &Planner{
		policy:   p,
		home:     home,
		auditors: append([]string{home}, auditors...),
		ledger:   NewLedger(p.Recent, p.MaxExecutors),
		rng:      rng,
	}, nil
}

// Policy returns the planner's policy.
func (pl *Planner) Policy() Policy { return pl.policy }

// Ledger returns the planner's per-executor history.
func (pl *Planner) Ledger() *Ledger { return pl.ledger }

// Record records a job's final verdict in the ledger; see Ledger.Record.
func (pl *Planner) Record(p Plan, v Verdict) []Dispute { return pl.ledger.Record(p, v) }

// AuditRate returns the share of did's jobs the planner audits now.
func (pl *Planner) AuditRate(did string) float64 {
	return pl.policy.auditRate(pl.ledger.Agreed(did))
}

// Plan picks the executors of job jobID: max(want, Redundancy) of them
// from cands, by standing read through r (a share Explore of picks
// uniformly, the rest in proportion to standing), never two sharing an
// operator key, never the requester's home. If any executor picked is
// in its warm-up and none is seasoned, one seasoned candidate more is
// added; if there is none, the job is audited. Otherwise the job is
// audited with the highest audit rate among its executors. A nil r
// counts everyone's standing as zero.
func (pl *Planner) Plan(jobID string, want int, cands []Candidate, r standing.Reader) (Plan, error) {
	pol := pl.policy
	want = max(want, pol.Redundancy)
	if want > pol.MaxRedundancy {
		return Plan{}, fmt.Errorf("%w: %d executors asked, at most %d (MaxRedundancy)", ErrRedundancy, want, pol.MaxRedundancy)
	}
	// Usable candidates: named, once each, not the home.
	seen := make(map[string]bool, len(cands)+1)
	seen[pl.home] = true
	cs := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if c.DID == "" || seen[c.DID] {
			continue
		}
		seen[c.DID] = true
		cs = append(cs, c)
	}
	st := make([]float64, len(cs))
	for i, c := range cs {
		if r != nil {
			if v := r.Of(c.DID); v > 0 && !math.IsInf(v, 0) {
				st[i] = v
			}
		}
	}
	agreed := pl.ledger.agreed(cs)
	taken := make([]bool, len(cs))
	var chosen []int
	free := func(i int) bool {
		if taken[i] {
			return false
		}
		for _, j := range chosen {
			if shares(cs[i].Operators, cs[j].Operators) {
				return false
			}
		}
		return true
	}
	seasoned := func(i int) bool { return agreed[i] >= pol.WarmUp }

	pl.mu.Lock()
	defer pl.mu.Unlock()
	for len(chosen) < want {
		i := pl.pick(st, free)
		if i < 0 {
			return Plan{}, fmt.Errorf("%w: %d wanted, %d of %d candidates usable", ErrTooFewCandidates, want, len(chosen), len(cands))
		}
		taken[i] = true
		chosen = append(chosen, i)
	}
	plan := Plan{JobID: jobID}
	anyWarm, anySeasoned := false, false
	for _, i := range chosen {
		if seasoned(i) {
			anySeasoned = true
		} else {
			anyWarm = true
		}
	}
	forced := false
	if anyWarm && !anySeasoned {
		if i := pl.pick(st, func(i int) bool { return seasoned(i) && free(i) }); i >= 0 {
			taken[i] = true
			chosen = append(chosen, i)
		} else {
			forced = true
		}
	}
	q := 0.0
	for _, i := range chosen {
		plan.Executors = append(plan.Executors, cs[i].DID)
		if !seasoned(i) {
			plan.WarmUp = append(plan.WarmUp, cs[i].DID)
		}
		q = max(q, pol.auditRate(agreed[i]))
	}
	if forced || pl.rng.Float64() < q {
		plan.Audit = true
		plan.Auditor = pl.auditor(plan.Executors)
	}
	return plan, nil
}

// pick returns the index of one candidate for which ok holds: with
// probability Explore (or when none of them has standing) uniformly,
// else in proportion to standing; -1 if there is none. pl.mu is held.
func (pl *Planner) pick(st []float64, ok func(int) bool) int {
	n, total := 0, 0.0
	for i := range st {
		if ok(i) {
			n++
			total += st[i]
		}
	}
	if n == 0 {
		return -1
	}
	uniform := total <= 0 || pl.rng.Float64() < pl.policy.Explore
	var x float64
	if uniform {
		x = float64(pl.rng.IntN(n))
	} else {
		x = pl.rng.Float64() * total
	}
	last := -1
	for i := range st {
		if !ok(i) {
			continue
		}
		last = i
		if uniform {
			if x < 1 {
				return i
			}
			x--
			continue
		}
		if x < st[i] {
			return i
		}
		x -= st[i]
	}
	return last // rounding left x just above the total
}

// auditor picks who runs an audit: uniformly among the home and the
// trusted auditors that are not executors of the job. pl.mu is held.
func (pl *Planner) auditor(executors []string) string {
	var ok []string
outer:
	for _, a := range pl.auditors {
		for _, e := range executors {
			if a == e {
				continue outer
			}
		}
		ok = append(ok, a)
	}
	return ok[pl.rng.IntN(len(ok))] // the home is never an executor
}
