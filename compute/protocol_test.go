package compute

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/compute/sandbox"
	"fleetmesh.org/fleetmesh/compute/verify"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

// wire carries job messages between in-process nodes the way the agent
// does (authcrypt both ways, return route) and keeps every byte it
// carried, as a relaying node would see them, and every outer message
// in plaintext, as a node that could open the outer envelope would.
type wire struct {
	nodes map[string]*wireNode
	mu    sync.Mutex
	seen  [][]byte
}

func (w *wire) saw(b []byte) {
	w.mu.Lock()
	w.seen = append(w.seen, b)
	w.mu.Unlock()
}

type wireNode struct {
	key    *identity.Key
	packer *didcomm.Packer
	unpack *didcomm.Unpacker
	exec   *Executor
}

func (w *wire) add(t *testing.T, exec func(k *identity.Key) *Executor) *wireNode {
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := didcomm.SecretsFromKey(k)
	n := &wireNode{key: k, packer: &didcomm.Packer{Secrets: sec, Resolver: didcomm.DIDKeyResolver{}},
		unpack: &didcomm.Unpacker{Secrets: sec, Resolver: didcomm.DIDKeyResolver{}, Limits: didcomm.DefaultLimits()}}
	if exec != nil {
		n.exec = exec(k)
	}
	if w.nodes == nil {
		w.nodes = map[string]*wireNode{}
	}
	w.nodes[k.DID()] = n
	return n
}

func (w *wire) request(from *wireNode) Request {
	return func(ctx context.Context, to string, m *didcomm.Message) (*didcomm.Message, error) {
		dst := w.nodes[to]
		m.From, m.To = from.key.DID(), []string{to}
		raw, err := from.packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
		if err != nil {
			return nil, err
		}
		w.saw(raw)
		u, err := dst.unpack.Unpack(raw)
		if err != nil {
			return nil, err
		}
		// What a node that opened the outer envelope (a mediator it
		// was addressed to) would read.
		w.saw(u.Plaintext)
		ans, err := dst.exec.Handle(ctx, u)
		if err != nil {
			return nil, err
		}
		ans.From, ans.To = to, []string{from.key.DID()}
		back, err := dst.packer.Pack(ans, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
		if err != nil {
			return nil, err
		}
		w.saw(back)
		u, err = from.unpack.Unpack(back)
		if err != nil {
			return nil, err
		}
		w.saw(u.Plaintext)
		return u.Message, nil
	}
}

// wat builds a module from compute/testdata/NAME.wat with wabt's
// wat2wasm (scripts/test.sh installs wabt).
func wat(t testing.TB, name string) []byte {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Skip("wat2wasm (Debian's wabt) is not installed; scripts/test.sh installs it")
	}
	out := filepath.Join(t.TempDir(), name+".wasm")
	if b, err := exec.Command("wat2wasm", filepath.Join("testdata", name+".wat"), "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", name, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sandboxed is the real sandbox (wazero's compiler) as a Runner.
func sandboxed(t testing.TB) Runner {
	r, err := sandbox.New(context.Background(), sandbox.Compiler)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return SandboxRunner(r)
}

// tally counts the units executors gave, by requester, and the times
// they were metered at.
type tally struct {
	mu  sync.Mutex
	m   map[string]uint64
	ats []time.Time
}

func (t *tally) gave(r string, u uint64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]uint64{}
	}
	t.m[r] += u
	t.ats = append(t.ats, at)
}

func (t *tally) of(r string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[r]
}

func offering(run Runner, gave *tally) func(k *identity.Key) *Executor {
	return func(k *identity.Key) *Executor {
		cfg := DefaultConfig()
		cfg.Offer = true
		e, err := NewExecutor(k, cfg, run, Hooks{Gave: gave.gave}, nil)
		if err != nil {
			panic(err)
		}
		return e
	}
}

func opens(jobID string, rep Report) bool {
	return verify.CheckCommit(jobID, rep.Executor, resultOf(rep.Outcome, rep.Hash), rep.Nonce, rep.Commitment) == nil && rep.Hash == rep.ResultHash
}

func TestJobOnThreeExecutors(t *testing.T) {
	mod, run := wat(t, "upper"), sandboxed(t)
	var w wire
	gave := &tally{}
	req := w.add(t, nil)
	var dids []string
	for range 3 {
		dids = append(dids, w.add(t, offering(run, gave)).key.DID())
	}
	off := w.add(t, func(k *identity.Key) *Executor {
		e, _ := NewExecutor(k, DefaultConfig(), run, Hooks{}, nil)
		return e
	})
	r, err := NewRequester(req.key, w.request(req))
	if err != nil {
		t.Fatal(err)
	}
	input := []byte("secret input words")
	job := Job{Module: mod, Input: input, Limits: okLimits}
	jobID := NewJobID()
	reps, err := r.Run(context.Background(), jobID, job, append([]string{off.key.DID()}, dids...))
	if err != nil {
		t.Fatal(err)
	}
	var d *DeclineError
	if len(reps) != 4 || !errors.As(reps[0].Err, &d) || d.Code != DeclineNotOffered {
		t.Fatalf("reports %+v: want the first declined as not offered", reps)
	}
	for _, rep := range reps[1:] {
		if rep.Err != nil || rep.Outcome != OutcomeOK || string(rep.Output) != "SECRET INPUT WORDS" || !opens(jobID, rep) {
			t.Fatalf("report %+v", rep)
		}
	}
	if got, want := gave.of(req.key.DID()), 3*Units(reps[1].Fuel); got != want || reps[1].Fuel == 0 {
		t.Fatalf("gave %d units, want %d (fuel %d)", got, want, reps[1].Fuel)
	}
	for _, b := range w.seen {
		if bytes.Contains(b, []byte("secret")) || bytes.Contains(b, []byte("SECRET")) {
			t.Fatal("the wire carried the input or output in clear")
		}
	}
}

// TestChangedAnswerDoesNotOpen: an executor that changes its answer
// after committing reveals what does not open its commitment.
func TestChangedAnswerDoesNotOpen(t *testing.T) {
	mod, run := wat(t, "upper"), sandboxed(t)
	var w wire
	gave := &tally{}
	req := w.add(t, nil)
	honest := w.add(t, offering(run, gave))
	liar := w.add(t, offering(run, gave))
	r, _ := NewRequester(req.key, w.request(req))
	base := w.request(req)
	r.request = func(ctx context.Context, to string, m *didcomm.Message) (*didcomm.Message, error) {
		if to == liar.key.DID() && m.Type == TypeReveal {
			liar.exec.mu.Lock()
			for _, j := range liar.exec.jobs {
				j.run.Output = []byte("FORGED")
				j.run.Hash = sha256.Sum256(j.run.Output)
			}
			liar.exec.mu.Unlock()
		}
		return base(ctx, to, m)
	}
	jobID := NewJobID()
	reps, err := r.Run(context.Background(), jobID, Job{Module: mod, Input: []byte("x"), Limits: okLimits},
		[]string{honest.key.DID(), liar.key.DID()})
	if err != nil {
		t.Fatal(err)
	}
	if !opens(jobID, reps[0]) || reps[1].Err != nil || opens(jobID, reps[1]) {
		t.Fatalf("reports %+v %+v: want the second's reveal not to open", reps[0], reps[1])
	}
}
