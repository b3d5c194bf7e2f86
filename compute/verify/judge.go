package verify

// Outcome is how a job ended, as the CLI's `outcome` field names it.
type Outcome string

// The outcomes of a job.
const (
	// OK: one result hash is accepted.
	OK Outcome = "ok"
	// Disagreement: executors revealed different hashes and no audit
	// settled it.
	Disagreement Outcome = "disagreement"
	// Inconclusive: no accepted hash, and nobody is wrong: every run
	// stopped at a limit, none was revealed, or the only results came
	// from executors in their warm-up with no one to check them.
	Inconclusive Outcome = "inconclusive"
)

// Reasons a Dispute gives.
const (
	// ReasonMismatch: the executor's result differs from the audit's.
	ReasonMismatch = "result differs from the audit"
	// ReasonCommitment: the executor's reveal does not open its
	// commitment (a copier, or a broken executor).
	ReasonCommitment = "reveal does not open its commitment"
)

// ReasonUnverified is a Verdict's Reason when the only conclusive
// results came from warm-up executors, which nobody checked.
const ReasonUnverified = "unverified"

// ReasonNoResult is a Verdict's Reason when no executor revealed
// anything.
const ReasonNoResult = "no result"

// Reveal is one executor's opened commitment: its result, the nonce,
// and the commitment it sent before any reveal (Commit).
type Reveal struct {
	Result
	Nonce      [32]byte
	Commitment [32]byte
}

// JobRef names a job and the hash the requester accepted for it.
type JobRef struct {
	JobID string
	Hash  [32]byte
}

// Dispute is a caught fault: Executor revealed Revealed where Accepted
// was the result (ReasonMismatch), or a reveal that does not open its
// commitment (ReasonCommitment). Its standing should fall (the caller
// reports it); Recheck, filled by Ledger.Record, lists its recent
// results nobody checked, to run again.
type Dispute struct {
	JobID    string
	Executor string
	Reason   string
	Revealed [32]byte
	Accepted [32]byte
	Recheck  []JobRef
}

// Verdict is what Judge decided of a job.
type Verdict struct {
	Outcome Outcome
	// Hash is the accepted result hash (OK only).
	Hash [32]byte
	// Reason says why a job is inconclusive: the first executor's
	// inconclusive reason in plan order, ReasonUnverified or
	// ReasonNoResult.
	Reason string
	// Audited is set when a conclusive audit decided the verdict.
	Audited bool
	// NeedAudit is set when only an audit can decide: the executors
	// disagree, or the only results came from warm-up executors. Run
	// the audit (the plan's Auditor, or the home when the plan had
	// none) and Judge again with it.
	NeedAudit bool
	// Agreed lists the executors whose result was the accepted one and
	// was checked, by the audit or by a seasoned executor that
	// revealed the same hash: the ledger counts them.
	Agreed []string
	// Unchecked lists the executors whose accepted result nobody
	// checked: the ledger remembers the job for a later re-check.
	Unchecked []string
	// Disputes lists the executors caught (Recheck empty until
	// Ledger.Record fills it).
	Disputes []Dispute
}

// Judge decides a job from the reveals of its executors (keyed by DID;
// only executors of p that committed before any reveal) and, when the
// requester ran one, its audit's result. It has no state: call it again
// with the audit when it says NeedAudit, and give the final verdict to
// Ledger.Record once.
//
// A conclusive audit is the reference: every executor whose conclusive
// result differs loses. Without one, a single hash revealed by at least
// one seasoned executor is accepted; different hashes are a
// disagreement that only an audit settles (never a vote: colluding
// identities can outvote). Inconclusive runs and missing reveals are
// never wrong; a reveal that does not open its commitment always is.
func Judge(p Plan, reveals map[string]Reveal, audit *Result) Verdict {
	var v Verdict
	type run struct {
		did string
		r   Result
	}
	var conclusive []run
	for _, did := range p.Executors {
		rv, ok := reveals[did]
		if !ok {
			continue
		}
		if CheckCommit(p.JobID, did, rv.Result, rv.Nonce, rv.Commitment) != nil {
			v.Disputes = append(v.Disputes, Dispute{JobID: p.JobID, Executor: did, Reason: ReasonCommitment, Revealed: rv.Hash})
			continue
		}
		if !rv.Conclusive() {
			if v.Reason == "" {
				v.Reason = rv.Inconclusive
			}
			continue
		}
		conclusive = append(conclusive, run{did, rv.Result})
	}
	if audit != nil && audit.Conclusive() {
		v.Outcome, v.Hash, v.Audited, v.Reason = OK, audit.Hash, true, ""
		for _, c := range conclusive {
			if c.r.Hash == audit.Hash {
				v.Agreed = append(v.Agreed, c.did)
			} else {
				v.Disputes = append(v.Disputes, Dispute{JobID: p.JobID, Executor: c.did, Reason: ReasonMismatch, Revealed: c.r.Hash, Accepted: audit.Hash})
			}
		}
		for i := range v.Disputes {
			v.Disputes[i].Accepted = audit.Hash
		}
		return v
	}
	if len(conclusive) == 0 {
		v.Outcome = Inconclusive
		if v.Reason == "" {
			v.Reason = ReasonNoResult
		}
		return v
	}
	for _, c := range conclusive[1:] {
		if c.r.Hash != conclusive[0].r.Hash {
			v.Outcome, v.NeedAudit, v.Reason = Disagreement, true, ""
			return v
		}
	}
	checked := false
	for _, c := range conclusive {
		if !p.inWarmUp(c.did) {
			checked = true
		}
	}
	if !checked {
		v.Outcome, v.NeedAudit, v.Reason = Inconclusive, true, ReasonUnverified
		return v
	}
	v.Outcome, v.Hash, v.Reason = OK, conclusive[0].r.Hash, ""
	if len(conclusive) == 1 {
		v.Unchecked = []string{conclusive[0].did}
		return v
	}
	for _, c := range conclusive {
		v.Agreed = append(v.Agreed, c.did)
	}
	return v
}
