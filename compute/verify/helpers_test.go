package verify

import (
	"math/rand/v2"
	"testing"
)

// standings is a standing.Reader over a map.
type standings map[string]float64

func (s standings) Of(did string) float64 { return s[did] }

// newPlanner makes a planner with policy p, home "home" and a seeded
// random source.
func newPlanner(t testing.TB, p Policy, seed uint64, auditors ...string) *Planner {
	t.Helper()
	pl, err := NewPlanner(p, "home", auditors, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// season gives did n checked agreements in pl's ledger.
func season(pl *Planner, did string, n int) {
	for range n {
		pl.Record(Plan{JobID: "warm"}, Verdict{Outcome: OK, Agreed: []string{did}})
	}
}

// cand is a candidate with one operator key of its own name unless keys
// are given.
func cand(did string, keys ...OperatorKey) Candidate {
	if len(keys) == 0 {
		keys = []OperatorKey{OperatorKey("op:" + did)}
	}
	return Candidate{DID: did, Operators: keys}
}

// hashOf is a distinct result hash per byte.
func hashOf(b byte) [32]byte {
	var h [32]byte
	for i := range h {
		h[i] = b
	}
	return h
}

// reveal makes did's opened commitment to r for job.
func reveal(job, did string, r Result) Reveal {
	nonce := hashOf(byte(len(did)) + 7)
	return Reveal{Result: r, Nonce: nonce, Commitment: Commit(job, did, r, nonce)}
}

func ok(b byte) Result { return Result{Hash: hashOf(b)} }

func stopped(reason string) Result { return Result{Inconclusive: reason} }
