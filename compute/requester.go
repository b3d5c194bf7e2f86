package compute

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
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
	// Redundancy is how many executors run it.
	Redundancy int
}

// Check refuses a job outside the protocol's bounds.
func (j *Job) Check() error {
	switch {
	case len(j.Module) == 0 || len(j.Module) > MaxModuleBytes:
		return fmt.Errorf("compute: module of %d bytes: must be from 1 to %d", len(j.Module), MaxModuleBytes)
	case len(j.Input) > MaxInputBytes:
		return fmt.Errorf("compute: input of %d bytes: at most %d", len(j.Input), MaxInputBytes)
	case j.Redundancy < 1 || j.Redundancy > MaxRedundancy:
		return fmt.Errorf("compute: redundancy %d: must be from 1 to %d", j.Redundancy, MaxRedundancy)
	}
	return j.Limits.Check()
}

// Report is one executor's part in a job, as the requester saw it.
type Report struct {
	Executor string
	// Err is set when the executor declined, failed or broke protocol
	// (a result that does not open its commitment, an output that does
	// not hash to the result hash): then the other fields are empty.
	Err        error
	Outcome    string
	ResultHash [32]byte
	Fuel       uint64
	Output     []byte
}

// Broke reports whether the executor broke the protocol (as opposed to
// declining or being unreachable): such an error is evidence against it.
func (r *Report) Broke() bool { return errors.Is(r.Err, ErrBroke) }

// ErrBroke is wrapped by an executor's error when what it sent is proof
// of misbehaviour: a result that does not open its commitment, or an
// output whose hash is not the result hash it committed to.
var ErrBroke = errors.New("executor broke the protocol")

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

// Run runs job on Redundancy executors taken in order from candidates
// (skipping those that decline or fail to answer the offer) and returns
// one report per executor that accepted. It returns an error when fewer
// than Redundancy accept.
func (r *Requester) Run(ctx context.Context, job Job, candidates []string) ([]Report, error) {
	if err := job.Check(); err != nil {
		return nil, err
	}
	jobID := NewJobID()
	offer := Offer{JobID: jobID, Module: ModuleCID(job.Module).String(), ModuleBytes: len(job.Module), Limits: job.Limits, Redundancy: job.Redundancy}
	type taker struct {
		did        string
		needModule bool
	}
	var takers []taker
	var refusals []string
	for _, c := range candidates {
		if len(takers) == job.Redundancy {
			break
		}
		if c == r.did {
			continue
		}
		m, err := Message(TypeOffer, jobID, offer)
		if err != nil {
			return nil, err
		}
		ans, err := r.request(ctx, c, m)
		if err != nil {
			refusals = append(refusals, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		switch ans.Type {
		case TypeAccept:
			a, err := ParseAccept(ans)
			if err != nil || a.JobID != jobID {
				refusals = append(refusals, fmt.Sprintf("%s: bad accept: %v", c, err))
				continue
			}
			takers = append(takers, taker{c, a.NeedModule})
		case TypeDecline:
			d, err := ParseDecline(ans)
			if err != nil {
				refusals = append(refusals, fmt.Sprintf("%s: bad decline: %v", c, err))
				continue
			}
			refusals = append(refusals, fmt.Sprintf("%s declined (%s): %s", c, d.Code, d.Reason))
		default:
			refusals = append(refusals, fmt.Sprintf("%s answered an offer with %s", c, ans.Type))
		}
	}
	if len(takers) < job.Redundancy {
		for _, t := range takers {
			r.cancel(ctx, jobID, t.did, "too few executors accepted")
		}
		return nil, &ShortError{Wanted: job.Redundancy, Got: len(takers), Refusals: refusals}
	}
	reports := make([]Report, len(takers))
	commits := make([][32]byte, len(takers))
	var wg sync.WaitGroup
	for i, t := range takers {
		reports[i].Executor = t.did
		wg.Add(1)
		go func() {
			defer wg.Done()
			commits[i], reports[i].Err = r.input(ctx, jobID, t.did, t.needModule, job)
		}()
	}
	wg.Wait()
	var listed []string
	for i := range reports {
		if reports[i].Err == nil {
			listed = append(listed, hex.EncodeToString(commits[i][:]))
		}
	}
	for i := range reports {
		if reports[i].Err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.reveal(ctx, jobID, listed, commits[i], &reports[i], job.Limits)
		}()
	}
	wg.Wait()
	return reports, nil
}

// ShortError is returned when fewer executors than wanted accepted.
type ShortError struct {
	Wanted, Got int
	Refusals    []string
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("compute: %d of the %d executors wanted accepted the job (%v)", e.Got, e.Wanted, e.Refusals)
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
		return [32]byte{}, fmt.Errorf("%w: commit for job %s, want %s", ErrBroke, c.JobID, jobID)
	}
	return commitment, nil
}

func (r *Requester) reveal(ctx context.Context, jobID string, listed []string, commitment [32]byte, rep *Report, l Limits) {
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
	if err != nil {
		rep.Err = fmt.Errorf("%w: %v", ErrBroke, err)
		return
	}
	if res.JobID != jobID || Commitment(jobID, rep.Executor, o.Outcome, o.ResultHash, o.Fuel, o.Nonce) != commitment {
		rep.Err = fmt.Errorf("%w: its result does not open the commitment it made", ErrBroke)
		return
	}
	out, err := r.sealer.Open(res.Sealed, rep.Executor, jobID, KindOutput, int(l.OutputBytes))
	if err != nil {
		rep.Err = fmt.Errorf("%w: %v", ErrBroke, err)
		return
	}
	if sha256.Sum256(out) != o.ResultHash {
		rep.Err = fmt.Errorf("%w: its output does not hash to its result hash", ErrBroke)
		return
	}
	rep.Outcome, rep.ResultHash, rep.Fuel, rep.Output = o.Outcome, o.ResultHash, o.Fuel, out
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
