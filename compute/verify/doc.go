// Package verify decides, for a requester of compute jobs, who runs
// each job and whether the result can be believed, when executor
// identities cost nothing (docs/design.md §8; issue 27 part 3; the wire
// form is the job/1.0 protocol of spec/compute.md, in package compute).
//
// It is policy only: pure Go, no I/O, no clock, deterministic given its
// random source. It does not run jobs (package compute/sandbox does),
// send messages (package compute does), or change standing (the caller
// reports each Dispute; standing is read through standing.Reader).
// The scheme is hand-written: no library does verification for
// permissionless volunteer compute with free identities; BOINC's
// adaptive replication (the baseline in the simulation) assumes
// identities are costly.
//
// # The scheme
//
//   - Selection by standing: Planner.Plan picks max(K, Redundancy)
//     executors from the candidates, a share Explore of picks uniformly
//     (a node with no standing still gets some work), the rest in
//     proportion to standing.Reader.Of. Never two that share an
//     OperatorKey (the same IPv4 /24, IPv6 /48, or announced operator
//     id: what the mesh can tell), never the requester's own node.
//   - Warm-up: an identity with fewer than WarmUp checked agreements in
//     the requester's Ledger never runs a job without a seasoned
//     executor beside it (the planner adds one) or, if there is none,
//     an audit. So a fresh identity does W jobs of real, checked work
//     before anything it returns alone is accepted.
//   - Audits, forever: each job is audited (re-run by the requester's
//     own node or an executor it trusts) with the highest audit rate of
//     its executors: AuditRate during the warm-up, ProbationAudit right
//     after it, falling as ProbationAudit·(W+1)/(n+1) with n checked
//     agreements, never below AuditRate > 0. Executors cannot tell an
//     audited job from another: the draw is the requester's, secret.
//   - Commit-reveal: each executor sends Commit(jobID, its DID, result,
//     nonce) before any result is revealed, then reveals result and
//     nonce. A copier that saw another's reveal cannot open its own
//     commitment to it: CheckCommit fails and Judge counts it a loser.
//   - Judgement: Judge accepts the audit's hash when there is one
//     (every conclusive executor that differs loses); without, one hash
//     revealed by at least one seasoned executor is accepted, and
//     different hashes are a disagreement that only an audit settles,
//     never a vote. Runs that stopped at a limit (fuel, memory, stack
//     depth, deadline) are inconclusive and never wrong.
//   - Disputes: Ledger.Record sets a loser's agreements to zero (it
//     warms up again) and returns its recent unchecked results
//     (Dispute.Recheck, at most Recent) for the requester to run again.
//     The caller lowers its standing.
//
// The error model: a cheater share f of jobs, a cheater caught on each
// wrong result with probability q, and W honest jobs before it can
// cheat alone give about f·((1−q)/q)/(W + 1/q) wrong results accepted.
// Selection by standing shrinks f (fresh identities get little work),
// the probation audit raises q where cheating starts (a fresh identity
// is caught on its first lone lie four times in five), and the low
// AuditRate keeps the cost of established executors down. The warm-up
// and probation alone meet the goal (0.1% wrong at 30% extra) in the
// simulation even with standing ignored: selection by standing is a
// margin, not the only defence. The figures
// under the simulation's threat model (colluding Sybils, fresh identity
// after each catch, flaky executors) are in
// docs/benchmarks/compute-verification.md.
//
// # Use
//
// One Planner per requester node (NewPlanner with DefaultPolicy, the
// node's own DID as home, the executors it trusts to audit, and a
// random source seeded from crypto/rand). For each job:
//
//	plan, err := planner.Plan(jobID, k, candidates, standingView)
//	// offer the job to plan.Executors; each answers with
//	// Commit(jobID, its DID, result, nonce); once every executor
//	// committed (or the commit deadline passed, dropping the late),
//	// ask for the reveals.
//	var audit *verify.Result // if plan.Audit: plan.Auditor's run
//	v := verify.Judge(plan, reveals, audit)
//	if v.NeedAudit && audit == nil { // run it (the home), then
//		v = verify.Judge(plan, reveals, &result)
//	}
//	for _, d := range planner.Record(plan, v) {
//		// report d.Executor (standing falls); run d.Recheck again
//	}
//
// v.Outcome is the CLI's `outcome` ("ok", "disagreement",
// "inconclusive" with v.Reason).
//
// # What the scheme guarantees
//
// Assuming the requester's own node (and the auditors it trusts) runs
// jobs correctly, execution is deterministic (honest executors' hashes
// agree), SHA-256 is collision resistant and the planner's random
// source is secret:
//
//   - Every job of every executor is audited with probability at least
//     AuditRate, independently of everything the executor can see,
//     forever. An identity that returns k wrong results escapes with
//     probability at most (1−AuditRate)^k; one that cheats on every job
//     it runs alone right after its warm-up is caught, in expectation,
//     within 1/ProbationAudit of them.
//   - No identity's result is accepted unchecked before it has WarmUp
//     checked agreements: each Sybil identity costs W jobs of correct
//     work, and a caught one starts again from zero.
//   - Nobody is convicted by votes: only a conclusive audit or a reveal
//     that does not open its commitment makes a Dispute, so a colluding
//     majority cannot get an honest executor blamed.
//   - An inconclusive run (a limit reached) is never a Dispute.
//   - A lazy copier gains nothing: it must commit before reveals, and a
//     commitment is bound to the job and the executor's DID.
//   - After a catch, the loser's last Recent unchecked results are
//     named for re-check.
//
// # What it does not guarantee
//
//   - That every accepted result is right. An unaudited result from one
//     executor, or from executors that collude and that the mesh cannot
//     tell apart (different addresses, no shared operator id), is
//     accepted; the rate is a statistical bound under a threat model,
//     measured, not zero. A result found wrong by a later re-check was
//     already delivered.
//   - Protection from a patient cheater: one that behaves until its
//     audit rate is down to AuditRate then cheats gets, in expectation,
//     (1−AuditRate)/AuditRate wrong results accepted per identity (it
//     paid for them with honest work).
//   - That an executor claiming a limit really reached it: an
//     inconclusive reveal is never a Dispute, even when the audit
//     finished within the same limits. It earns the executor nothing
//     (no agreement), and a caller that wants more can compare the fuel
//     it claims with the audit's (metering is deterministic).
//   - Anything if the requester's own node computes wrongly: then honest
//     executors lose disputes.
//   - Confidentiality of inputs from the executors that run them.
//   - A shared memory between requesters: each requester's Ledger is its
//     own and in memory; standing is what carries reputation across.
//   - That standing is as costly as the simulation assumes (earned only
//     by serving jobs). If Sybils earn standing more cheaply elsewhere,
//     selection by standing helps less; the "standing ignored" row of
//     the simulation is that case.
//   - Quick work for honest newcomers: a node with no standing gets a
//     share Explore of picks, and its first WarmUp jobs each cost the
//     requester a second execution.
//   - Secrecy of audits the caller gives away: the caller must treat an
//     audited job exactly like another on the wire (same messages, same
//     timing) and keep the random source secret.
package verify
