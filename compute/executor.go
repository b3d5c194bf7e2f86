package compute

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/compute/verify"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

// Run is one sandboxed run as the executor reports it: the outcome, the
// canonical output, its hash and the fuel burnt.
type Run struct {
	Outcome string
	Output  []byte
	Hash    [32]byte
	Fuel    uint64
}

// Runner runs a module on an input within limits: the node passes the
// sandbox's (package compute/sandbox). An error is a failure of the
// executor itself (the module would not compile, the engine broke), not
// an outcome of the module.
type Runner func(ctx context.Context, module, input []byte, l Limits) (Run, error)

// Hooks connect an executor to the node's accounting: Allow asks the
// requester's grant for compute units before a job is accepted, Gave
// meters the units given once a run ends. Either may be nil.
type Hooks struct {
	Allow func(requester string, units uint64) error
	// Gave meters the units of a result as given to the requester, in
	// the window of at: the time the result carries as `metered`, which
	// the requester counts them at too.
	Gave func(requester string, units uint64, at time.Time)
	// Ran is told of every run's outcome and fuel (for metrics).
	Ran func(outcome string, fuel uint64)
}

// moduleCacheSize is how many modules (by CID) an executor keeps, so a
// requester sends a module's bytes once, not with every job.
const moduleCacheSize = 32

// Executor is the executor's side of job/1.0: it answers offers, runs
// the jobs it accepted on their sealed input, commits, and reveals when
// asked. Its Handle is registered on the node's DIDComm agent.
type Executor struct {
	cfg    Config
	did    string
	sealer *Sealer
	run    Runner
	hooks  Hooks
	log    *slog.Logger

	mu      sync.Mutex
	jobs    map[string]*execJob
	modules map[string][]byte // CID → bytes
	order   []string          // modules, oldest first
}

// execJob is one job an executor accepted.
type execJob struct {
	requester string
	offer     Offer
	expires   time.Time
	// Set once run:
	ran    bool
	run    Run
	nonce  [32]byte
	commit [32]byte
}

// NewExecutor makes the executor of the node with key k.
func NewExecutor(k *identity.Key, cfg Config, run Runner, hooks Hooks, log *slog.Logger) (*Executor, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("compute: %w", err)
	}
	s, err := NewSealer(k)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Executor{cfg: cfg, did: k.DID(), sealer: s, run: run, hooks: hooks, log: log,
		jobs: map[string]*execJob{}, modules: map[string][]byte{}}, nil
}

// Handle answers one job/1.0 message (an agent.Handler).
func (e *Executor) Handle(ctx context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
	if !u.Authenticated {
		return nil, &didcomm.Problem{Code: didcomm.CodeUnauthorized, Err: errors.New("compute: job messages must be authcrypted")}
	}
	m := u.Message
	switch m.Type {
	case TypeOffer:
		return e.offer(m)
	case TypeInput:
		return e.input(ctx, m)
	case TypeReveal:
		return e.reveal(m)
	case TypeCancel:
		b, err := ParseCancel(m)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		if j := e.jobs[b.JobID]; j != nil && j.requester == m.From {
			delete(e.jobs, b.JobID)
		}
		e.mu.Unlock()
		return didcomm.NewMessage(typeEmpty, nil)
	}
	return nil, &didcomm.Problem{Code: didcomm.CodeUnsupportedType, Err: fmt.Errorf("compute: an executor does not take %s", m.Type)}
}

// typeEmpty acknowledges a cancel (https://didcomm.org/empty/1.0).
const typeEmpty = "https://didcomm.org/empty/1.0/empty"

func decline(m *didcomm.Message, jobID, code, reason string) (*didcomm.Message, error) {
	return Message(TypeDecline, m.Thread(), Decline{JobID: jobID, Code: code, Reason: reason})
}

func (e *Executor) offer(m *didcomm.Message) (*didcomm.Message, error) {
	b, err := ParseOffer(m)
	if err != nil {
		return nil, err
	}
	if !e.cfg.Offer {
		return decline(m, b.JobID, DeclineNotOffered, "this node does not execute jobs ([compute] offer = false)")
	}
	if max := e.cfg.Limits(); !b.Limits.Within(max) {
		return decline(m, b.JobID, DeclineLimits, fmt.Sprintf("limits past this node's: at most fuel %d, memory_pages %d, output_bytes %d, call_depth %d, deadline_ms %d",
			max.Fuel, max.MemoryPages, max.OutputBytes, max.CallDepth, max.DeadlineMS))
	}
	if b.ModuleBytes > e.cfg.MaxModuleBytes {
		return decline(m, b.JobID, DeclineModule, fmt.Sprintf("module of %d bytes: this node takes at most %d", b.ModuleBytes, e.cfg.MaxModuleBytes))
	}
	if e.hooks.Allow != nil {
		if err := e.hooks.Allow(m.From, Units(b.Limits.Fuel)); err != nil {
			return decline(m, b.JobID, DeclineGrant, err.Error())
		}
	}
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, j := range e.jobs {
		if now.After(j.expires) {
			delete(e.jobs, id)
		}
	}
	if _, dup := e.jobs[b.JobID]; dup {
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("compute: job %s offered twice", b.JobID)}
	}
	if len(e.jobs) >= e.cfg.Concurrency {
		return decline(m, b.JobID, DeclineBusy, fmt.Sprintf("%d jobs in hand, the most this node takes", len(e.jobs)))
	}
	e.jobs[b.JobID] = &execJob{requester: m.From, offer: *b, expires: now.Add(e.cfg.JobTimeout.Duration)}
	_, have := e.modules[b.Module]
	return Message(TypeAccept, m.Thread(), Accept{JobID: b.JobID, NeedModule: !have})
}

// job returns the job id from requester, or a problem.
func (e *Executor) job(id, from string) (*execJob, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[id]
	if j == nil || j.requester != from {
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("compute: no job %s from %s here (offer it first)", id, from)}
	}
	return j, nil
}

func (e *Executor) input(ctx context.Context, m *didcomm.Message) (*didcomm.Message, error) {
	b, module, err := ParseInput(m)
	if err != nil {
		return nil, err
	}
	j, err := e.job(b.JobID, m.From)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if j.ran {
		e.mu.Unlock()
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("compute: job %s has had its input", b.JobID)}
	}
	j.ran = true // claimed: a second input is refused while this one runs
	cached := e.modules[j.offer.Module]
	e.mu.Unlock()
	if module == nil {
		module = cached
	}
	if module == nil {
		return nil, malformed("input of job %s: no module, and none with CID %s here", b.JobID, j.offer.Module)
	}
	if err := CheckModule(j.offer.Module, module); err != nil {
		return nil, err
	}
	if len(module) != j.offer.ModuleBytes {
		return nil, malformed("module of %d bytes, offered as %d", len(module), j.offer.ModuleBytes)
	}
	e.keepModule(j.offer.Module, module)
	in, err := e.sealer.Open(b.Sealed, m.From, b.JobID, KindInput, e.cfg.MaxInputBytes)
	if err != nil {
		return nil, err
	}
	deadline := time.Duration(j.offer.Limits.DeadlineMS) * time.Millisecond
	rctx, cancel := context.WithTimeout(ctx, deadline+time.Second)
	defer cancel()
	r, err := e.run(rctx, module, in, j.offer.Limits)
	if err != nil {
		e.forget(b.JobID)
		code := didcomm.CodeInternal
		if errors.Is(err, ErrRefused) {
			code = didcomm.CodeMalformed
		}
		return nil, &didcomm.Problem{Code: code, Err: fmt.Errorf("compute: job %s: %w", b.JobID, err)}
	}
	if e.hooks.Ran != nil {
		e.hooks.Ran(r.Outcome, r.Fuel)
	}
	var nonce [32]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	c := verify.Commit(b.JobID, e.did, resultOf(r.Outcome, r.Hash), nonce)
	e.mu.Lock()
	j.run, j.nonce, j.commit = r, nonce, c
	e.mu.Unlock()
	return Message(TypeCommit, m.Thread(), Commit{JobID: b.JobID, Commitment: hex.EncodeToString(c[:])})
}

func (e *Executor) reveal(m *didcomm.Message) (*didcomm.Message, error) {
	b, err := ParseReveal(m)
	if err != nil {
		return nil, err
	}
	j, err := e.job(b.JobID, m.From)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	ready := j.ran && j.commit != [32]byte{}
	run, nonce, commit := j.run, j.nonce, j.commit
	e.mu.Unlock()
	if !ready {
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("compute: job %s has not committed yet", b.JobID)}
	}
	mine := hex.EncodeToString(commit[:])
	listed := false
	for _, c := range b.Commitments {
		listed = listed || c == mine
	}
	if !listed {
		return nil, malformed("reveal of job %s does not list this executor's commitment", b.JobID)
	}
	sealed, err := e.sealer.Seal(m.From, b.JobID, KindOutput, run.Output)
	if err != nil {
		return nil, err
	}
	e.forget(b.JobID)
	// The units are given as the result goes out, at the time the
	// result names: the requester counts them at that time too, so both
	// count them in the same window however long it takes to judge.
	at := time.Now()
	if e.hooks.Gave != nil {
		e.hooks.Gave(m.From, Units(run.Fuel), at)
	}
	return Message(TypeResult, m.Thread(), Result{JobID: b.JobID, Outcome: run.Outcome, ResultHash: hex.EncodeToString(run.Hash[:]),
		Fuel: run.Fuel, Nonce: hex.EncodeToString(nonce[:]), Metered: at.Unix(), Sealed: sealed})
}

func (e *Executor) forget(id string) {
	e.mu.Lock()
	delete(e.jobs, id)
	e.mu.Unlock()
}

// keepModule caches a module by CID, dropping the oldest past the bound.
func (e *Executor) keepModule(c string, module []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.modules[c]; ok {
		return
	}
	e.modules[c] = module
	e.order = append(e.order, c)
	if len(e.order) > moduleCacheSize {
		delete(e.modules, e.order[0])
		e.order = e.order[1:]
	}
}
