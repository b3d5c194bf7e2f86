package compute

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/compute/verify"
	"fleetmesh.org/fleetmesh/didcomm"
)

// TestMarketCatches: a job planned by the verification policy runs on
// three executors of which one returns a wrong output (a cheat) and one
// reveals another's answer over its own commitment (a lazy copier); the
// requester's own audit catches both, their units are not counted, and
// the honest one is credited.
func TestMarketCatches(t *testing.T) {
	mod, run := wat(t, "upper"), sandboxed(t)
	var w wire
	gave := &tally{}
	req := w.add(t, nil)
	honest := w.add(t, offering(run, gave))
	cheat := w.add(t, offering(func(ctx context.Context, module, input []byte, l Limits) (Run, error) {
		r, err := run(ctx, module, input, l)
		r.Output = []byte("WRONG")
		r.Hash = sha256.Sum256(r.Output)
		return r, err
	}, gave))
	copier := w.add(t, offering(func(ctx context.Context, module, input []byte, l Limits) (Run, error) {
		r := Run{Outcome: OutcomeOK, Output: []byte("a guess"), Fuel: 1}
		r.Hash = sha256.Sum256(r.Output)
		return r, nil
	}, gave))
	base := w.request(req)
	var once sync.Once
	r, err := NewRequester(req.key, func(ctx context.Context, to string, m *didcomm.Message) (*didcomm.Message, error) {
		if to == copier.key.DID() && m.Type == TypeReveal {
			// The copier learnt the honest answer from a colluder and
			// reveals it instead of what it committed to.
			once.Do(func() {
				out := []byte("SOME INPUT")
				copier.exec.mu.Lock()
				for _, j := range copier.exec.jobs {
					j.run.Output, j.run.Hash = out, sha256.Sum256(out)
				}
				copier.exec.mu.Unlock()
			})
		}
		return base(ctx, to, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	received := map[string]uint64{}
	receivedAt := map[string]time.Time{}
	var caught []verify.Dispute
	cands := []verify.Candidate{{DID: honest.key.DID()}, {DID: cheat.key.DID()}, {DID: copier.key.DID()}}
	mk, err := NewMarket(req.key.DID(), DefaultConfig(), r, run, verify.DefaultPolicy(), MarketHooks{
		Candidates: func() []verify.Candidate { return cands },
		Received: func(e string, u uint64, at time.Time) {
			received[e] += u
			receivedAt[e] = at
		},
		Caught: func(d verify.Dispute) { caught = append(caught, d) },
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := mk.Run(context.Background(), Job{Module: mod, Input: []byte("some input"), Limits: okLimits}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if v.Outcome != "ok" || string(v.Output) != "SOME INPUT" || !v.Audited || len(v.Executors) != 3 {
		t.Fatalf("verdict %+v", v)
	}
	reasons := map[string]string{}
	for _, d := range caught {
		reasons[d.Executor] = d.Reason
	}
	if reasons[cheat.key.DID()] != verify.ReasonMismatch || reasons[copier.key.DID()] != verify.ReasonCommitment || len(caught) != 2 {
		t.Fatalf("caught %+v: want the cheat on a mismatch and the copier on its commitment", caught)
	}
	if received[honest.key.DID()] == 0 || received[cheat.key.DID()] != 0 || received[copier.key.DID()] != 0 {
		t.Fatalf("units counted %v: only the honest executor's", received)
	}
	// The requester counts the honest units at the second the executor
	// metered them, whenever it got round to judging.
	stamped := false
	for _, at := range gave.ats {
		stamped = stamped || at.Unix() == receivedAt[honest.key.DID()].Unix()
	}
	if !stamped {
		t.Fatalf("units received at %v, given at %v: want the executor's second", receivedAt[honest.key.DID()], gave.ats)
	}
	if got := mk.Planner().Ledger().Executor(cheat.key.DID()).Losses; got != 1 {
		t.Fatalf("the cheat has %d losses in the ledger", got)
	}
}

// TestMeteredAt: the time a result's units are counted at is the
// executor's, kept within the job's span; none said, now.
func TestMeteredAt(t *testing.T) {
	started, now := time.Unix(1000, 0), time.Unix(1010, 0)
	tests := []struct {
		name       string
		said, want time.Time
	}{
		{"within the job", time.Unix(1005, 0), time.Unix(1005, 0)},
		{"none said", time.Time{}, now},
		{"after now", time.Unix(5000, 0), now},
		{"before the job", time.Unix(10, 0), started},
	}
	for _, tt := range tests {
		if got := meteredAt(tt.said, started, now); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
