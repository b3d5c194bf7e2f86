package verify

import (
	"errors"
	"fmt"
)

// Policy is what a requester asks of the executors of its jobs. Every
// field is a bound listed in spec/limits.md ("Compute verification");
// DefaultPolicy gives the values the simulation
// (docs/benchmarks/compute-verification.md) measured.
type Policy struct {
	// Redundancy is the least number of executors a job runs on; a
	// user's own K is a floor above it, never below.
	Redundancy int
	// MaxRedundancy bounds K: a plan with more executors is refused.
	MaxRedundancy int
	// WarmUp is W: how many checked agreements (with a seasoned
	// co-executor or an audit) an identity needs before it runs a job
	// with no seasoned executor beside it.
	WarmUp int
	// AuditRate is q, the share of every executor's jobs the requester
	// re-runs at random, forever. Never zero.
	AuditRate float64
	// ProbationAudit is the audit rate of an identity that has just
	// finished its warm-up. It falls as ProbationAudit·(W+1)/(n+1) with
	// the identity's checked agreements n, never below AuditRate.
	ProbationAudit float64
	// Explore is the share of executor picks made uniformly among the
	// candidates, whatever their standing: how much work an identity
	// with no standing still gets (services prefer standing, they never
	// refuse a node for having none). The other picks are in proportion
	// to standing. Greater than zero.
	Explore float64
	// Recent bounds how many unchecked results the Ledger remembers per
	// executor: the ones returned for re-check when it loses a dispute.
	Recent int
	// MaxExecutors bounds how many executors the Ledger remembers; the
	// least recently seen is forgotten first (it warms up again).
	MaxExecutors int
}

// DefaultPolicy is the policy a requester uses unless its operator sets
// another.
func DefaultPolicy() Policy {
	return Policy{
		Redundancy:     1,
		MaxRedundancy:  7,
		WarmUp:         60,
		AuditRate:      0.1,
		ProbationAudit: 0.8,
		Explore:        0.05,
		Recent:         64,
		MaxExecutors:   10000,
	}
}

// ErrPolicy is wrapped by every error Validate returns.
var ErrPolicy = errors.New("verify: invalid policy")

// Validate reports the first field out of its range, naming it.
func (p Policy) Validate() error {
	switch {
	case p.MaxRedundancy < 1:
		return fmt.Errorf("%w: MaxRedundancy %d, want at least 1", ErrPolicy, p.MaxRedundancy)
	case p.Redundancy < 1 || p.Redundancy > p.MaxRedundancy:
		return fmt.Errorf("%w: Redundancy %d, want 1 to MaxRedundancy (%d)", ErrPolicy, p.Redundancy, p.MaxRedundancy)
	case p.WarmUp < 0:
		return fmt.Errorf("%w: WarmUp %d, want 0 or more", ErrPolicy, p.WarmUp)
	case !(p.AuditRate > 0 && p.AuditRate <= 1):
		return fmt.Errorf("%w: AuditRate %v, want more than 0 and at most 1 (audits never stop)", ErrPolicy, p.AuditRate)
	case !(p.ProbationAudit >= p.AuditRate && p.ProbationAudit <= 1):
		return fmt.Errorf("%w: ProbationAudit %v, want AuditRate (%v) to 1", ErrPolicy, p.ProbationAudit, p.AuditRate)
	case !(p.Explore > 0 && p.Explore <= 1):
		return fmt.Errorf("%w: Explore %v, want more than 0 and at most 1 (newcomers must get some work)", ErrPolicy, p.Explore)
	case p.Recent < 1:
		return fmt.Errorf("%w: Recent %d, want at least 1", ErrPolicy, p.Recent)
	case p.MaxExecutors < 1:
		return fmt.Errorf("%w: MaxExecutors %d, want at least 1", ErrPolicy, p.MaxExecutors)
	}
	return nil
}

// auditRate is the audit rate of an executor with n checked
// agreements: AuditRate during the warm-up (its jobs are checked by a
// seasoned co-executor already), ProbationAudit just after it, falling
// as 1/n to AuditRate.
func (p Policy) auditRate(n int) float64 {
	if n < p.WarmUp {
		return p.AuditRate
	}
	return max(p.AuditRate, p.ProbationAudit*float64(p.WarmUp+1)/float64(n+1))
}
