package compute

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

// wire carries job messages between in-process nodes the way the agent
// does (authcrypt both ways, return route) and keeps every byte it
// carried, as a relaying node would see them.
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
		return u.Message, nil
	}
}

// upper is a stand-in for the sandbox in the message-layer tests: its
// output is the input in upper case, and it burns a fuel per byte.
func upper(_ context.Context, module, input []byte, l Limits) (Run, error) {
	out := bytes.ToUpper(input)
	return Run{Outcome: OutcomeOK, Output: out, Hash: sha256.Sum256(out), Fuel: uint64(len(input)) * 20_000}, nil
}

// tally counts the units executors gave, by requester.
type tally struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (t *tally) gave(r string, u uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]uint64{}
	}
	t.m[r] += u
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

func TestJobOnThreeExecutors(t *testing.T) {
	var w wire
	gave := &tally{}
	req := w.add(t, nil)
	var dids []string
	for range 3 {
		dids = append(dids, w.add(t, offering(upper, gave)).key.DID())
	}
	off := w.add(t, func(k *identity.Key) *Executor {
		e, _ := NewExecutor(k, DefaultConfig(), upper, Hooks{}, nil)
		return e
	})
	r, err := NewRequester(req.key, w.request(req))
	if err != nil {
		t.Fatal(err)
	}
	input := []byte("secret input words")
	job := Job{Module: []byte("\x00asm\x01\x00\x00\x00"), Input: input, Limits: okLimits, Redundancy: 3}
	reps, err := r.Run(context.Background(), job, append([]string{off.key.DID()}, dids...))
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 3 {
		t.Fatalf("%d reports, want 3", len(reps))
	}
	for _, rep := range reps {
		if rep.Err != nil || rep.Outcome != OutcomeOK || string(rep.Output) != "SECRET INPUT WORDS" {
			t.Fatalf("report %+v", rep)
		}
		if gave.of(req.key.DID()) == 0 {
			t.Fatal("no compute units metered")
		}
	}
	if gave.of(req.key.DID()) != 3*Units(uint64(len(input))*20_000) {
		t.Fatalf("gave %d units, want 3 x %d", gave.of(req.key.DID()), Units(uint64(len(input))*20_000))
	}
	for _, b := range w.seen {
		if bytes.Contains(b, []byte("secret")) || bytes.Contains(b, []byte("SECRET")) {
			t.Fatal("the wire carried the input or output in clear")
		}
	}
	// A redundancy nobody can meet is refused with who declined why.
	job.Redundancy = 4
	_, err = r.Run(context.Background(), job, append([]string{off.key.DID()}, dids...))
	var short *ShortError
	if !errors.As(err, &short) || short.Got != 3 {
		t.Fatalf("err %v, want 3 of 4", err)
	}
}

// TestBrokenOpeningIsCaught: an executor whose reveal does not open its
// commitment (it changed its answer after committing) is caught.
func TestBrokenOpeningIsCaught(t *testing.T) {
	var w wire
	gave := &tally{}
	req := w.add(t, nil)
	honest := w.add(t, offering(upper, gave))
	liar := w.add(t, offering(upper, gave))
	r, _ := NewRequester(req.key, w.request(req))
	// The liar's executor re-runs with another output between commit and
	// reveal.
	liar.exec.run = func(ctx context.Context, module, input []byte, l Limits) (Run, error) {
		return upper(ctx, module, input, l)
	}
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
	reps, err := r.Run(context.Background(), Job{Module: []byte("\x00asm"), Input: []byte("x"), Limits: okLimits, Redundancy: 2},
		[]string{honest.key.DID(), liar.key.DID()})
	if err != nil {
		t.Fatal(err)
	}
	if reps[0].Err != nil || !reps[1].Broke() {
		t.Fatalf("reports %+v %+v: want the second caught", reps[0], reps[1])
	}
}
