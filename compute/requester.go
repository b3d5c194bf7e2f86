package compute

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sync"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

// Request sends a job message to the node with that DID and returns its
// answer on the same connection (agent.Service.Request).
type Request func(ctx context.Context, to string, m *didcomm.Message) (*didcomm.Message, error)

// Job is what a requester asks to have run.
type Job struct {
	Module []byte
	Input  []byte
	Limits Limits
}

// Check refuses a job outside the protocol's bounds.
func (j *Job) Check() error {
	switch {
	case len(j.Module) == 0 || len(j.Module) > MaxModuleBytes:
		return fmt.Errorf("compute: module of %d bytes: must be from 1 to %d", len(j.Module), MaxModuleBytes)
	case len(j.Input) > MaxInputBytes:
		return fmt.Errorf("compute: input of %d bytes: at most %d", len(j.Input), MaxInputBytes)
	}
	return j.Limits.Check()
}

// Report is one executor's part in a job, as the requester saw it.
type Report struct {
	Executor string
	// Err is set when the executor declined, failed or sent what does
	// not parse: then it revealed nothing and is never counted wrong.
	Err error
	// Commitment is what it committed to; the rest is its reveal.
	Commitment [32]byte
	Opening
	// Output is its output, opened; Hash is the output's own hash,
	// which differs from the revealed ResultHash only when the
	// executor broke the protocol (then its reveal does not open its
	// commitment with the output it sent).
	Output []byte
	Hash   [32]byte
}

// Revealed reports whether the executor got as far as revealing.
func (r *Report) Revealed() bool { return r.Err == nil }

// Requester is the requester's side of job/1.0: it offers a job to
// executors until enough accept, sends each the module and its sealed
// input, gathers every commitment before asking any executor to
// reveal, and checks each opening and output.
type Requester struct {
	did     string
	sealer  *Sealer
	request Request
}

// NewRequester makes the requester of the node with key k, sending with
// request.
func NewRequester(k *identity.Key, request Request) (*Requester, error) {
	s, err := NewSealer(k)
	if err != nil {
		return nil, err
	}
	return &Requester{did: k.DID(), sealer: s, request: request}, nil
}

// Run runs job jobID on the executors named and returns one report per
// executor, in order: it offers the job to each, sends every one that
// accepted its input, gathers every commitment, and only then asks each
// to reveal. An executor that declines or fails has a report with Err
// set; whether a reveal opens its commitment is for the judge
// (package compute/verify) to say.
func (r *Requester) Run(ctx context.Context, jobID string, job Job, executors []string) ([]Report, error) {
	if err := job.Check(); err != nil {
		return nil, err
	}
	if len(executors) < 1 || len(executors) > MaxRedundancy {
		return nil, fmt.Errorf("compute: %d executors: must be from 1 to %d", len(executors), MaxRedundancy)
	}
	offer := Offer{JobID: jobID, Module: ModuleCID(job.Module).String(), ModuleBytes: len(job.Module), Limits: job.Limits, Redundancy: len(executors)}
	reports := make([]Report, len(executors))
	var wg sync.WaitGroup
	for i, did := range executors {
		reports[i].Executor = did
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := &reports[i]
			var need bool
			if need, rep.Err = r.offer(ctx, jobID, did, offer); rep.Err == nil {
				rep.Commitment, rep.Err = r.input(ctx, jobID, did, need, job)
			}
		}()
	}
	wg.Wait()
	var listed []string
	for i := range reports {
		if reports[i].Err == nil {
			listed = append(listed, hex.EncodeToString(reports[i].Commitment[:]))
		}
	}
	for i := range reports {
		if reports[i].Err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.reveal(ctx, jobID, listed, &reports[i], job.Limits)
		}()
	}
	wg.Wait()
	for i := range reports {
		if reports[i].Err != nil && (len(listed) > 0 || reports[i].Commitment != [32]byte{}) {
			r.cancel(ctx, jobID, reports[i].Executor, "failed")
		}
	}
	return reports, nil
}

// DeclineError is an executor's decline of an offer.
type DeclineError struct{ Decline }

func (e *DeclineError) Error() string {
	return fmt.Sprintf("compute: declined (%s): %s", e.Code, e.Reason)
}

// offer offers the job to one executor: whether it wants the module's
// bytes, or why not.
func (r *Requester) offer(ctx context.Context, jobID, to string, offer Offer) (needModule bool, err error) {
	m, err := Message(TypeOffer, jobID, offer)
	if err != nil {
		return false, err
	}
	ans, err := r.request(ctx, to, m)
	if err != nil {
		return false, err
	}
	switch ans.Type {
	case TypeAccept:
		a, err := ParseAccept(ans)
		if err != nil {
			return false, err
		}
		if a.JobID != jobID {
			return false, malformed("accept of job %s, want %s", a.JobID, jobID)
		}
		return a.NeedModule, nil
	case TypeDecline:
		d, err := ParseDecline(ans)
		if err != nil {
			return false, err
		}
		return false, &DeclineError{*d}
	}
	return false, malformed("an offer answered with %s", ans.Type)
}

func (r *Requester) input(ctx context.Context, jobID, to string, needModule bool, job Job) ([32]byte, error) {
	sealed, err := r.sealer.Seal(to, jobID, KindInput, job.Input)
	if err != nil {
		return [32]byte{}, err
	}
	body := Input{JobID: jobID, Sealed: sealed}
	if needModule {
		body.Module = b64(job.Module)
	}
	m, err := Message(TypeInput, jobID, body)
	if err != nil {
		return [32]byte{}, err
	}
	ans, err := r.request(ctx, to, m)
	if err != nil {
		return [32]byte{}, err
	}
	c, commitment, err := ParseCommit(ans)
	if err != nil {
		return [32]byte{}, err
	}
	if c.JobID != jobID {
		return [32]byte{}, malformed("commit for job %s, want %s", c.JobID, jobID)
	}
	return commitment, nil
}

func (r *Requester) reveal(ctx context.Context, jobID string, listed []string, rep *Report, l Limits) {
	m, err := Message(TypeReveal, jobID, Reveal{JobID: jobID, Commitments: listed})
	if err != nil {
		rep.Err = err
		return
	}
	ans, err := r.request(ctx, rep.Executor, m)
	if err != nil {
		rep.Err = err
		return
	}
	res, o, err := ParseResult(ans)
	if err == nil && res.JobID != jobID {
		err = malformed("result of job %s, want %s", res.JobID, jobID)
	}
	if err != nil {
		rep.Err = err
		return
	}
	out, err := r.sealer.Open(res.Sealed, rep.Executor, jobID, KindOutput, int(l.OutputBytes))
	if err != nil {
		rep.Err = err
		return
	}
	rep.Opening, rep.Output, rep.Hash = o, out, sha256.Sum256(out)
}

// cancel tells an executor that accepted that the job is off; it is a
// courtesy (the executor forgets the job at job_timeout anyway), so its
// failure is ignored.
func (r *Requester) cancel(ctx context.Context, jobID, to, reason string) {
	if m, err := Message(TypeCancel, jobID, Cancel{JobID: jobID, Reason: reason}); err == nil {
		_, _ = r.request(ctx, to, m)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
