package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"fleetmesh.org/fleetmesh/nostr"
)

var errInjected = errors.New("injected fault")

// faultBatch fails the step-th read or write a save makes of the shared
// batch, and every one after it.
type faultBatch struct {
	batchRW
	steps *int
	at    int
	fired *bool
}

func (f faultBatch) step() error {
	*f.steps++
	if *f.steps > f.at {
		*f.fired = true
		return errInjected
	}
	return nil
}

func (f faultBatch) Get(key []byte) ([]byte, io.Closer, error) {
	if err := f.step(); err != nil {
		return nil, nil, err
	}
	return f.batchRW.Get(key)
}

func (f faultBatch) Set(key, value []byte, o *pebble.WriteOptions) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.batchRW.Set(key, value, o)
}

func (f faultBatch) Delete(key []byte, o *pebble.WriteOptions) error {
	if err := f.step(); err != nil {
		return err
	}
	return f.batchRW.Delete(key, o)
}

func (m *model) clone() *model {
	return &model{events: maps.Clone(m.events), delIDs: maps.Clone(m.delIDs), delAddr: maps.Clone(m.delAddr)}
}

// sameAsModel compares every event the store serves, through the index
// each filter shape uses, with the model.
func sameAsModel(t *testing.T, fx *fixture, m *model, r *rand.Rand, history []*nostr.Event, what string) {
	t.Helper()
	var all nostr.Filter
	for _, k := range fx.keys {
		all.Authors = append(all.Authors, k.PubKey())
	}
	filters := []nostr.Filter{all, {Kinds: []int{1, 7, 0, 3, 10002, 30023, 30000, 5}}, {Tags: map[string][]string{"t": {"x", "y"}}}, {Since: 1}}
	// By id: the newest events (those a failed save may have touched) and
	// a sample of the rest.
	for i, e := range history {
		if i >= len(history)-12 || r.IntN(len(history)) < 12 {
			filters = append(filters, nostr.Filter{IDs: [][32]byte{e.ID}})
		}
	}
	for range 2 {
		filters = append(filters, randomFilter(r, fx, history))
	}
	for _, f := range filters {
		want := m.query(&f, fx.now)
		got := fx.query(f, 10_000)
		slices.SortFunc(got, newestFirst)
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("%s: filter %+v:\nstore %v\nmodel %v", what, f, ids(got), ids(want))
		}
	}
}

// TestSaveAllOrNothing fails each save at every read and write it makes of
// the shared batch, in a commit group with two other saves, and checks
// that the store is then exactly the model with the other two saves and
// without the failed one: nothing of a failed save is committed, and the
// saves beside it are committed whole. FLEETMESH_STORE_FAULTS=full runs
// eight times as many events.
func TestSaveAllOrNothing(t *testing.T) {
	events := 5
	if os.Getenv("FLEETMESH_STORE_FAULTS") == "full" {
		events = 80
	}
	r := rand.New(rand.NewPCG(7, 42))
	var (
		target *nostr.Event
		at     int
		steps  int
		fired  bool
		gate   = make(chan struct{})
		gating *nostr.Event
	)
	opts := Options{wrapBatch: func(e *nostr.Event, b batchRW) batchRW {
		if e == gating {
			<-gate
		}
		if e != target {
			return b
		}
		steps = 0
		return faultBatch{batchRW: b, steps: &steps, at: at, fired: &fired}
	}}
	opts.fs = vfs.NewMem() // fsync costs nothing here: this test is about the batch
	fx := newFixtureWith(t, 4, opts, "db")
	m := newModel()
	var history []*nostr.Event
	// group commits c1, e, c2 in one batch: a gate save holds the writer
	// until all three are queued behind it.
	group := func(evs ...*nostr.Event) []*saveReq {
		gating = fx.event(0, 1, fx.now, nil, fmt.Sprint("gate", len(history)))
		gate = make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := fx.s.Save(context.Background(), gating); err != nil || res != Stored {
				t.Errorf("gate save: %v %v", res, err)
			}
		}()
		m.save(gating, fx.now)
		history = append(history, gating)
		reqs := make([]*saveReq, len(evs))
		for i, e := range evs {
			reqs[i] = &saveReq{ev: e, done: make(chan struct{})}
		}
		for len(fx.s.writes) > 0 { // the gate save is taken by the writer
			time.Sleep(time.Millisecond)
		}
		for _, q := range reqs {
			fx.s.writes <- q
		}
		close(gate)
		wg.Wait()
		for _, q := range reqs {
			<-q.done
		}
		return reqs
	}
	for i := range events {
		e := randomEvent(r, fx, history, fmt.Sprint("e", i))
		for at = 0; ; at++ {
			c1 := randomEvent(r, fx, history, fmt.Sprint("c1.", i, ".", at))
			c2 := randomEvent(r, fx, history, fmt.Sprint("c2.", i, ".", at))
			target, fired = e, false
			reqs := group(c1, e, c2)
			if !fired {
				for j, q := range reqs {
					if want := m.save(q.ev, fx.now); q.err != nil || q.res != want {
						t.Fatalf("event %d, no fault: save %d: %v %v, model %v", i, j, q.res, q.err, want)
					}
				}
				history = append(history, c1, e, c2)
				break
			}
			if !errors.Is(reqs[1].err, errInjected) {
				t.Fatalf("event %d, fault at step %d: save returned %v %v", i, at, reqs[1].res, reqs[1].err)
			}
			for _, q := range []*saveReq{reqs[0], reqs[2]} {
				if want := m.save(q.ev, fx.now); q.err != nil || q.res != want {
					t.Fatalf("event %d, fault at step %d: the save beside it: %v %v, model %v", i, at, q.res, q.err, want)
				}
			}
			history = append(history, c1, c2)
			sameAsModel(t, fx, m, r, history, fmt.Sprintf("event %d (kind %d), fault at step %d", i, e.Kind, at))
		}
		target = nil
		if r.IntN(10) == 0 {
			fx.restart()
			sameAsModel(t, fx, m, r, history, fmt.Sprintf("after restart at event %d", i))
		}
	}
}

// writeFault is an errorfs injector that, once armed, fails the n-th write
// operation (create, write, sync) on Pebble's write-ahead log or on a
// record segment with ENOSPC, the error a full disk gives. Those are a
// save's writes; the others (removing obsolete files, flushes) are the
// background's.
type writeFault struct {
	armed atomic.Bool
	n     atomic.Int64
	fired atomic.Bool
	op    atomic.Value // the errorfs.Op that failed
}

func (w *writeFault) String() string { return "writeFault" }

func (w *writeFault) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpCreate, errorfs.OpReuseForWrite, errorfs.OpFilePreallocate, errorfs.OpFileWrite,
		errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !w.armed.Load() || !strings.HasSuffix(op.Path, ".log") && !strings.HasSuffix(op.Path, ".rec") {
		return nil
	}
	if w.n.Add(-1) < 0 {
		w.armed.Store(false)
		w.fired.Store(true)
		w.op.Store(op)
		return fmt.Errorf("%w: %w", errInjected, syscall.ENOSPC)
	}
	return nil
}

// TestSaveDiskFaults fails a save at each filesystem write a save causes
// (Pebble's errorfs over a crashable in-memory filesystem), with ENOSPC.
// The save returns an error and the process goes on (Pebble calls such a
// failure fatal); the store keeps serving reads; at the point of the fault
// a crash (the synced state only) loses nothing acknowledged, and the
// failed save is wholly there or wholly absent; once writes are retried
// the store is the model before the save, or, when the fault came after
// the bytes reached the file (a failed fsync), the model with the save.
// FLEETMESH_STORE_FAULTS=full runs eight times as many events.
func TestSaveDiskFaults(t *testing.T) {
	events := 10
	if os.Getenv("FLEETMESH_STORE_FAULTS") == "full" {
		events = 80
	}
	mem := vfs.NewCrashableMem()
	inj := &writeFault{}
	fx := newFixtureWith(t, 4, Options{fs: errorfs.Wrap(mem, inj), retryMin: time.Millisecond}, "db")
	m := newModel()
	r := rand.New(rand.NewPCG(9, 42))
	var history []*nostr.Event
	faults := map[string]int{}
	defer func() { t.Logf("faults injected, by operation: %v", faults) }()
	for i := range events {
		for at := int64(0); ; at++ {
			// A fresh save each time: the one before it is stored.
			e := randomEvent(r, fx, history, fmt.Sprint("e", i, ".", at))
			inj.fired.Store(false)
			inj.n.Store(at)
			inj.armed.Store(true)
			res, err := fx.s.Save(context.Background(), e)
			inj.armed.Store(false)
			if !inj.fired.Load() {
				if want := m.save(e, fx.now); err != nil || res != want {
					t.Fatalf("event %d, no fault: %v %v, model %v", i, res, err, want)
				}
				history = append(history, e)
				break
			}
			op := inj.op.Load().(errorfs.Op)
			faults[fmt.Sprintf("%v %s", op.Kind, path.Ext(op.Path))]++
			what := fmt.Sprintf("event %d (kind %d), fault at write %d (%v %s)", i, e.Kind, at, op.Kind, op.Path)
			if err == nil {
				// A write outside this save's commit (none is expected
				// for saves this small) failed without touching it.
				t.Fatalf("%s: save succeeded", what)
			}
			if !errors.Is(err, ErrWritesStopped) {
				t.Fatalf("%s: error %v, want ErrWritesStopped", what, err)
			}
			with := m.clone()
			with.save(e, fx.now)
			hist := append(slices.Clone(history), e)

			// A crash now keeps what was synced.
			crash := newFixtureWith(t, 0, Options{fs: mem.CrashClone(vfs.CrashCloneCfg{})}, "db")
			crash.keys, crash.now = fx.keys, fx.now
			oneOf(t, crash, m, with, r, hist, what+", after a crash")
			crash.s.Close()

			// The process goes on: reads are served, and after the
			// backoff step writes resume.
			oneOf(t, fx, m, with, r, hist, what+", reads after the fault")
			var res2 Result
			for try := 0; ; try++ {
				res2, err = fx.s.Save(context.Background(), e)
				if !errors.Is(err, ErrWritesStopped) || try > 1000 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if err != nil {
				t.Fatalf("%s: writes did not resume: %v", what, err)
			}
			switch res2 {
			case Duplicate: // the failed fsync's bytes were on disk
				if op.Kind == errorfs.OpFileWrite {
					t.Fatalf("%s: a save whose write failed is on disk", what)
				}
				m = with
				history = hist
			default:
				if want := m.clone().save(e, fx.now); res2 != want {
					t.Fatalf("%s: save after recovery %v, model %v", what, res2, want)
				}
				m.save(e, fx.now)
				history = hist
			}
			sameAsModel(t, fx, m, r, history, what+", after recovery")
		}
	}
}

// oneOf checks that the store is exactly one of two models.
func oneOf(t *testing.T, fx *fixture, a, b *model, r *rand.Rand, history []*nostr.Event, what string) {
	t.Helper()
	var all nostr.Filter
	for _, k := range fx.keys {
		all.Authors = append(all.Authors, k.PubKey())
	}
	got := ids(fx.query(all, 10_000))
	slices.Sort(got)
	for _, m := range []*model{a, b} {
		want := ids(m.query(&all, fx.now))
		slices.Sort(want)
		if slices.Equal(got, want) {
			sameAsModel(t, fx, m, r, history, what)
			return
		}
	}
	t.Fatalf("%s: the store holds %v, neither the model before the save nor after it", what, got)
}

// TestStorageBound: at MaxBytes a save that would write is refused with
// ErrFull, one that writes nothing (a duplicate) is still answered, and
// reads go on.
func TestStorageBound(t *testing.T) {
	fx := newFixtureWith(t, 1, Options{MaxBytes: 1}, t.TempDir())
	e := fx.event(0, 1, fx.now, nil, "first")
	_, err := fx.s.Save(context.Background(), e)
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "storage_max_bytes") {
		t.Fatalf("save at the bound: %v, want ErrFull naming storage_max_bytes", err)
	}
	fx.restart()
	fx.s.opts.MaxBytes = 0 // space returns
	if r := fx.save(e); r != Stored {
		t.Fatalf("after space returned: %v", r)
	}
	fx.restart()
	fx.s.opts.MaxBytes = 1
	if r := fx.save(e); r != Duplicate {
		t.Fatalf("duplicate at the bound: %v", r)
	}
	if got := fx.query(nostr.Filter{IDs: [][32]byte{e.ID}}, 1); len(got) != 1 {
		t.Fatal("reads stopped at the bound")
	}
}

// TestDeleteDiskFault fails a Delete's commit at each write it makes on
// the write-ahead log: the call returns an error, the store holds either
// every event it named or none of them, before and after a crash, and once
// writes resume the Delete goes through.
func TestDeleteDiskFault(t *testing.T) {
	mem := vfs.NewCrashableMem()
	inj := &writeFault{}
	fx := newFixtureWith(t, 4, Options{fs: errorfs.Wrap(mem, inj), retryMin: time.Millisecond}, "db")
	m := newModel()
	r := rand.New(rand.NewPCG(10, 42))
	var history []*nostr.Event
	for i := range 6 {
		e := fx.event(i%4, 1, fx.now-int64(i), nil, fmt.Sprint("to delete ", i))
		if got := fx.save(e); got != m.save(e, fx.now) {
			t.Fatalf("save %d: %v", i, got)
		}
		history = append(history, e)
	}
	del := [][32]byte{history[0].ID, history[2].ID, history[5].ID}
	for at := int64(0); ; at++ {
		inj.fired.Store(false)
		inj.n.Store(at)
		inj.armed.Store(true)
		n, err := fx.s.Delete(context.Background(), del)
		inj.armed.Store(false)
		after := m.clone()
		removed := after.delete(del)
		if !inj.fired.Load() {
			if err != nil || n != removed {
				t.Fatalf("no fault: removed %d (%v), want %d", n, err, removed)
			}
			sameAsModel(t, fx, after, r, history, "after the delete")
			t.Logf("faults injected at the first %d writes", at)
			return
		}
		what := fmt.Sprintf("fault at write %d", at)
		if !errors.Is(err, ErrWritesStopped) {
			t.Fatalf("%s: error %v, want ErrWritesStopped", what, err)
		}
		crash := newFixtureWith(t, 0, Options{fs: mem.CrashClone(vfs.CrashCloneCfg{})}, "db")
		crash.keys, crash.now = fx.keys, fx.now
		oneOf(t, crash, m, after, r, history, what+", after a crash")
		crash.s.Close()
		oneOf(t, fx, m, after, r, history, what+", reads after the fault")
		// The store holds all of them or none (oneOf): the model follows
		// it. Then writes resume after the backoff step, which a save
		// shows, and the next try starts from there.
		if len(fx.query(nostr.Filter{IDs: del}, len(del))) == 0 {
			m = after
		}
		probe := fx.event(0, 1, fx.now, nil, fmt.Sprint("probe after the fault at write ", at))
		for try := 0; ; try++ {
			_, err := fx.s.Save(context.Background(), probe)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrWritesStopped) || try > 1000 {
				t.Fatalf("%s: writes did not resume: %v", what, err)
			}
			time.Sleep(time.Millisecond)
		}
		m.save(probe, fx.now)
		history = append(history, probe)
	}
}
