package compute

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/compute/verify"
	"fleetmesh.org/fleetmesh/standing"
)

// MarketHooks connect the requester's side to the node: who may run
// jobs, how standing reads, and the accounting of what executors gave.
type MarketHooks struct {
	// Candidates lists the executors the node knows of now (peers whose
	// descriptors offer compute), with what the mesh can tell of their
	// operators.
	Candidates func() []verify.Candidate
	// Standing reads executors' standing (nil: everyone's is zero).
	Standing standing.Reader
	// Received meters the compute units an executor gave this node for
	// a result this node counts, in the window of at: the time the
	// executor metered them, kept within the job's own span. A caught
	// executor's units are not counted (spec/compute.md "Accounting").
	Received func(executor string, units uint64, at time.Time)
	// Caught is told of every dispute, after the metrics count it: the
	// node refuses its open window with the executor, so the window is
	// disputed whatever the executor claims (spec/compute.md
	// "Accounting").
	Caught func(verify.Dispute)
}

// recentJobs is how many jobs the market keeps (module and input) to
// re-run when an executor of one is caught later.
const recentJobs = 256

// Market is one node's side of the compute market as a requester: it
// plans a job (package compute/verify: executors by standing, warm-up,
// audits), runs it with the Requester, audits it on the node's own
// sandbox when the plan says so, judges the reveals and records the
// verdict; a caught executor's recent unchecked results are run again.
type Market struct {
	did     string
	cfg     Config
	req     *Requester
	planner *verify.Planner
	local   Runner
	hooks   MarketHooks
	m       *Metrics
	log     *slog.Logger

	mu     sync.Mutex
	recent map[string]Job // job id → job, for re-checks
	order  []string
}

// NewMarket makes the requester's side of the node whose DID is did:
// req sends the jobs, local runs audits and re-checks on the node's own
// sandbox, policy is the verification policy.
func NewMarket(did string, cfg Config, req *Requester, local Runner, policy verify.Policy, hooks MarketHooks, m *Metrics, log *slog.Logger) (*Market, error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, err
	}
	// Audits must be unpredictable to executors: the planner's source is
	// seeded from crypto/rand.
	pl, err := verify.NewPlanner(policy, did, nil, mrand.New(mrand.NewChaCha8(seed)))
	if err != nil {
		return nil, fmt.Errorf("compute: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Market{did: did, cfg: cfg, req: req, planner: pl, local: local, hooks: hooks, m: m, log: log, recent: map[string]Job{}}, nil
}

// Planner returns the market's planner (its ledger holds each
// executor's record).
func (mk *Market) Planner() *verify.Planner { return mk.planner }

// RunReport is one executor's part in a job, for people and scripts.
type RunReport struct {
	Executor   string `json:"executor"`
	Outcome    string `json:"outcome,omitempty"`
	ResultHash string `json:"result_hash,omitempty"`
	Fuel       uint64 `json:"fuel,omitempty"`
	Error      string `json:"error,omitempty"`
	// Agreed: its result was the accepted one and was checked.
	Agreed bool `json:"agreed,omitempty"`
	// Caught: it lost a dispute on this job.
	Caught string `json:"caught,omitempty"`
}

// Verdict is a job's end as `fleetmesh job run --json` prints it.
type Verdict struct {
	JobID string `json:"job_id"`
	// Outcome is ok, disagreement or inconclusive.
	Outcome string `json:"outcome"`
	// Reason says why a job is inconclusive or in disagreement.
	Reason string `json:"reason,omitempty"`
	// Output is the accepted output (base64 in JSON).
	Output []byte `json:"output"`
	// ResultHash is the accepted output's sha2-256, hex (empty unless ok).
	ResultHash string `json:"result_hash"`
	// Executors are the executors the job ran on.
	Executors []string    `json:"executors"`
	Audited   bool        `json:"audited"`
	Runs      []RunReport `json:"runs"`
}

// Run runs one job on at least redundancy executors (0: the
// configured redundancy) and returns the verdict.
func (mk *Market) Run(ctx context.Context, job Job, redundancy int) (*Verdict, error) {
	started := time.Now()
	if redundancy == 0 {
		redundancy = mk.cfg.Redundancy
	}
	if job.Limits == (Limits{}) {
		job.Limits = mk.cfg.Limits()
	}
	if err := job.Check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, mk.cfg.JobTimeout.Duration)
	defer cancel()
	jobID := NewJobID()
	var cands []verify.Candidate
	if mk.hooks.Candidates != nil {
		cands = mk.hooks.Candidates()
	}
	plan, err := mk.planner.Plan(jobID, redundancy, cands, mk.hooks.Standing)
	if err != nil {
		mk.m.jobs.WithLabelValues("failed").Inc()
		return nil, fmt.Errorf("compute: %w (%d executors known: nodes offer compute with [compute] offer = true)", err, len(cands))
	}
	// A planned audit runs beside the executors, not after them: the
	// verdict, and with it the units this node counts as received, then
	// follows the reveals at once, in the window the executors count
	// the units they gave.
	outputs := map[[32]byte][]byte{}
	var audit *verify.Result
	var auditErr error
	auditDone := make(chan struct{})
	if plan.Audit {
		go func() {
			defer close(auditDone)
			audit, auditErr = mk.audit(ctx, job, outputs)
		}()
	} else {
		close(auditDone)
	}
	reports, err := mk.req.Run(ctx, jobID, job, plan.Executors)
	<-auditDone
	if auditErr != nil {
		mk.log.Warn("compute: audit", "job", jobID, "err", auditErr)
	}
	if err != nil {
		mk.m.jobs.WithLabelValues("failed").Inc()
		return nil, err
	}
	reveals := map[string]verify.Reveal{}
	for _, r := range reports {
		if !r.Revealed() {
			continue
		}
		mk.m.fuel.WithLabelValues("requester").Add(float64(r.Fuel))
		// The revealed result is the output's own hash: an executor that
		// sent an output other than the one it committed to fails to
		// open its commitment.
		reveals[r.Executor] = verify.Reveal{Result: resultOf(r.Outcome, r.Hash), Nonce: r.Nonce, Commitment: r.Commitment}
		outputs[r.Hash] = r.Output
	}
	v := verify.Judge(plan, reveals, audit)
	if v.NeedAudit && audit == nil {
		if audit, err = mk.audit(ctx, job, outputs); err != nil {
			mk.log.Warn("compute: audit", "job", jobID, "err", err)
		} else {
			v = verify.Judge(plan, reveals, audit)
		}
	}
	disputes := mk.planner.Record(plan, v)
	mk.keep(jobID, job)
	caught := map[string]string{}
	for _, d := range disputes {
		caught[d.Executor] = d.Reason
		mk.m.disputes.Inc()
		mk.log.Warn("compute: executor caught", "job", d.JobID, "executor", d.Executor, "reason", d.Reason, "recheck", len(d.Recheck))
		if mk.hooks.Caught != nil {
			mk.hooks.Caught(d)
		}
		mk.recheck(ctx, d)
	}
	out := &Verdict{JobID: jobID, Outcome: string(v.Outcome), Reason: v.Reason, Executors: plan.Executors, Audited: v.Audited, Output: []byte{}}
	agreed := map[string]bool{}
	for _, did := range v.Agreed {
		agreed[did] = true
	}
	for _, r := range reports {
		rr := RunReport{Executor: r.Executor, Agreed: agreed[r.Executor], Caught: caught[r.Executor]}
		if r.Revealed() {
			rr.Outcome, rr.ResultHash, rr.Fuel = r.Outcome, hex.EncodeToString(r.Hash[:]), r.Fuel
			if caught[r.Executor] == "" && mk.hooks.Received != nil {
				mk.hooks.Received(r.Executor, Units(r.Fuel), meteredAt(r.Metered, started, time.Now()))
			}
		} else {
			rr.Error = r.Err.Error()
		}
		out.Runs = append(out.Runs, rr)
	}
	switch v.Outcome {
	case verify.OK:
		out.ResultHash = hex.EncodeToString(v.Hash[:])
		out.Output = outputs[v.Hash]
		if out.Output == nil {
			out.Output = []byte{}
		}
	case verify.Disagreement:
		if out.Reason == "" {
			out.Reason = "executors revealed different results and no audit settled it"
		}
	case verify.Inconclusive:
		if out.Reason == "" {
			out.Reason = "no conclusive result"
		}
	}
	mk.m.jobs.WithLabelValues(out.Outcome).Inc()
	return out, nil
}

// meteredAt is the time this node counts a result's units at: the time
// the executor says it metered them, kept within the job's span as this
// node saw it (from started to now), so an executor can move its units
// into no window the job did not touch; now when it said none.
func meteredAt(said, started, now time.Time) time.Time {
	switch {
	case said.IsZero(), said.After(now):
		return now
	case said.Before(started):
		return started
	}
	return said
}

// resultOf is a run's result as the judge takes it: the output's hash,
// or the outcome when the run stopped at a limit.
func resultOf(outcome string, hash [32]byte) verify.Result {
	if inconclusive(outcome) {
		return verify.Result{Inconclusive: outcome}
	}
	return verify.Result{Hash: hash}
}

// inconclusive reports whether an outcome says only that the limits
// were too small (spec/compute.md "Outcomes").
func inconclusive(outcome string) bool {
	switch outcome {
	case OutcomeOutOfFuel, OutcomeOutOfMemory, OutcomeStackExhausted, OutcomeDeadline:
		return true
	}
	return false
}

// audit runs the job on the node's own sandbox: the reference a judge
// holds every executor to. Its output is kept with the others'.
func (mk *Market) audit(ctx context.Context, job Job, outputs map[[32]byte][]byte) (*verify.Result, error) {
	if mk.local == nil {
		return nil, errors.New("no local sandbox to audit with")
	}
	r, err := mk.local(ctx, job.Module, job.Input, job.Limits)
	if err != nil {
		return nil, err
	}
	mk.m.fuel.WithLabelValues("auditor").Add(float64(r.Fuel))
	res := resultOf(r.Outcome, r.Hash)
	if res.Conclusive() {
		outputs[r.Hash] = r.Output
	}
	return &res, nil
}

// keep remembers a job for re-checks, dropping the oldest past the bound.
func (mk *Market) keep(jobID string, job Job) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	mk.recent[jobID] = job
	mk.order = append(mk.order, jobID)
	if len(mk.order) > recentJobs {
		delete(mk.recent, mk.order[0])
		mk.order = mk.order[1:]
	}
}

// recheck runs a caught executor's recent unchecked jobs again on the
// node's own sandbox and counts what it finds.
func (mk *Market) recheck(ctx context.Context, d verify.Dispute) {
	for _, ref := range d.Recheck {
		mk.mu.Lock()
		job, ok := mk.recent[ref.JobID]
		mk.mu.Unlock()
		if !ok || mk.local == nil {
			mk.m.rechecks.WithLabelValues("unavailable").Inc()
			continue
		}
		r, err := mk.local(ctx, job.Module, job.Input, job.Limits)
		switch {
		case err != nil:
			mk.m.rechecks.WithLabelValues("unavailable").Inc()
		case r.Hash == ref.Hash && !inconclusive(r.Outcome):
			mk.m.rechecks.WithLabelValues("agreed").Inc()
		default:
			mk.m.rechecks.WithLabelValues("wrong").Inc()
			mk.log.Warn("compute: a re-check found an accepted result wrong", "job", ref.JobID, "executor", d.Executor,
				"accepted", hex.EncodeToString(ref.Hash[:]), "rerun", hex.EncodeToString(r.Hash[:]))
		}
	}
}

// Ran counts one run this node executed for another (Hooks.Ran).
func (mk *Metrics) Ran(outcome string, fuel uint64) {
	mk.runs.WithLabelValues(outcome).Inc()
	mk.fuel.WithLabelValues("executor").Add(float64(fuel))
}
