package verify

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
)

// Result is what one run of a job gave: the SHA-256 of its canonical
// output bytes, or, when the run stopped at a limit, why (Inconclusive:
// the sandbox's outcome, "out_of_fuel", "out_of_memory",
// "stack_exhausted" or "deadline"; then Hash is ignored). An
// inconclusive result is never wrong. A run that ended otherwise
// without output (a trap, an output too large) is deterministic, so it
// is conclusive: its Hash is over the canonical form package compute
// gives such an ending.
type Result struct {
	Hash         [32]byte
	Inconclusive string
}

// Conclusive reports whether the run finished with an output.
func (r Result) Conclusive() bool { return r.Inconclusive == "" }

// commitDomain separates commitments from every other SHA-256 input.
const commitDomain = "fleetmesh-job-commit/1\x00"

// Commit is an executor's commitment to its result for a job:
//
//	SHA-256( "fleetmesh-job-commit/1" 0x00
//	       || u32be(len(jobID)) || jobID
//	       || u32be(len(executor)) || executor
//	       || u32be(len(r.Inconclusive)) || r.Inconclusive
//	       || r.Hash (32 bytes; all zero when inconclusive)
//	       || nonce (32 bytes) )
//
// The executor sends it before any result is revealed and reveals the
// result and the nonce after every executor has committed. The nonce
// (32 bytes from crypto/rand, fresh per job) hides the result, so a
// commitment says nothing of a result from a small set (a boolean, a
// count); the job id and the executor's DID bind it, so a copier can
// neither reuse another's commitment nor open its own to a result it saw
// later.
func Commit(jobID, executor string, r Result, nonce [32]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(commitDomain))
	var n [4]byte
	for _, s := range []string{jobID, executor, r.Inconclusive} {
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	hash := r.Hash
	if !r.Conclusive() {
		hash = [32]byte{}
	}
	h.Write(hash[:])
	h.Write(nonce[:])
	var c [32]byte
	h.Sum(c[:0])
	return c
}

// ErrCommitment is returned by CheckCommit when a reveal does not open
// the commitment its executor sent.
var ErrCommitment = errors.New("verify: the revealed result and nonce do not open the executor's commitment")

// CheckCommit reports whether r and nonce open commitment c of executor
// for jobID.
func CheckCommit(jobID, executor string, r Result, nonce, c [32]byte) error {
	got := Commit(jobID, executor, r, nonce)
	if subtle.ConstantTimeCompare(got[:], c[:]) != 1 {
		return ErrCommitment
	}
	return nil
}
