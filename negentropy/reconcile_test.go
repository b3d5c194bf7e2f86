package negentropy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// syncStats is what one reconciliation between two in-process peers cost.
type syncStats struct {
	have, need []ID
	rounds     int // initiator messages sent (the initial one included)
	up, down   int // bytes initiator→responder and back
	maxUp      int // largest message after the initial one, each way
	maxDown    int
}

// maxRounds stops a test whose reconciliation does not terminate.
const maxRounds = 10_000

// runSync reconciles a (initiator) against b (responder) in process.
func runSync(t testing.TB, a, b []Item, ca, cb Config) syncStats {
	t.Helper()
	va, err := NewVector(slices.Clone(a))
	if err != nil {
		t.Fatal(err)
	}
	vb, err := NewVector(slices.Clone(b))
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewInitiator(va, ca)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := NewResponder(vb, cb)
	if err != nil {
		t.Fatal(err)
	}
	var st syncStats
	msg, err := in.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	for {
		st.rounds++
		if st.rounds > maxRounds {
			t.Fatalf("no convergence after %d rounds", maxRounds)
		}
		st.up += len(msg)
		if st.rounds > 1 {
			st.maxUp = max(st.maxUp, len(msg))
		}
		reply, err := resp.Reconcile(msg)
		if err != nil {
			t.Fatalf("round %d: responder: %v", st.rounds, err)
		}
		st.down += len(reply)
		st.maxDown = max(st.maxDown, len(reply))
		step, err := in.Reconcile(reply)
		if err != nil {
			t.Fatalf("round %d: initiator: %v", st.rounds, err)
		}
		st.have = append(st.have, step.Have...)
		st.need = append(st.need, step.Need...)
		if step.Done() {
			return st
		}
		msg = step.Next
	}
}

// minus returns the ids of a that are not in b.
func minus(a, b []Item) []ID {
	in := make(map[ID]bool, len(b))
	for _, it := range b {
		in[it.ID] = true
	}
	var out []ID
	for _, it := range a {
		if !in[it.ID] {
			out = append(out, it.ID)
		}
	}
	return out
}

func sameIDs(t testing.TB, what string, got, want []ID) {
	t.Helper()
	cmp := func(x, y ID) int { return slices.Compare(x[:], y[:]) }
	g, w := slices.Clone(got), slices.Clone(want)
	slices.SortFunc(g, cmp)
	slices.SortFunc(w, cmp)
	if len(slices.Compact(slices.Clone(g))) != len(g) {
		t.Errorf("%s: an id was reported twice", what)
	}
	if !slices.Equal(g, w) {
		t.Errorf("%s: got %d ids, want %d", what, len(g), len(w))
	}
}

// checkSync reconciles a against b and checks the initiator learned exactly
// the symmetric difference, within the frame limits.
func checkSync(t testing.TB, a, b []Item, ca, cb Config) syncStats {
	t.Helper()
	st := runSync(t, a, b, ca, cb)
	sameIDs(t, "have", st.have, minus(a, b))
	sameIDs(t, "need", st.need, minus(b, a))
	if ca.FrameSizeLimit > 0 && st.maxUp > ca.FrameSizeLimit {
		t.Errorf("initiator sent %d bytes, limit %d", st.maxUp, ca.FrameSizeLimit)
	}
	if cb.FrameSizeLimit > 0 && st.maxDown > cb.FrameSizeLimit {
		t.Errorf("responder sent %d bytes, limit %d", st.maxDown, cb.FrameSizeLimit)
	}
	return st
}

// randomItem draws an item with timestamp ts and a random id.
func randomItem(r *rand.Rand, ts uint64) Item {
	it := Item{Timestamp: ts}
	for i := 0; i < IDSize; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			it.ID[i+j] = byte(v >> (8 * j))
		}
	}
	return it
}

// makeSets builds a common part of n items plus onlyA and onlyB extra items,
// with timestamps drawn by ts.
func makeSets(r *rand.Rand, n, onlyA, onlyB int, ts func() uint64) (a, b []Item) {
	for range n {
		it := randomItem(r, ts())
		a = append(a, it)
		b = append(b, it)
	}
	for range onlyA {
		a = append(a, randomItem(r, ts()))
	}
	for range onlyB {
		b = append(b, randomItem(r, ts()))
	}
	return a, b
}

func TestReconcileCases(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	spread := func() uint64 { return 1_700_000_000 + r.Uint64N(1_000_000) }
	same := func() uint64 { return 1_700_000_000 }
	zero := func() uint64 { return 0 }
	top := func() uint64 { return Infinity - 1 - r.Uint64N(2) }
	extremes := func() uint64 { return []uint64{0, 1, Infinity - 1}[r.IntN(3)] }

	cases := []struct {
		name              string
		common, onlyA, oB int
		ts                func() uint64
	}{
		{"both empty", 0, 0, 0, spread},
		{"initiator empty", 0, 0, 500, spread},
		{"responder empty", 0, 500, 0, spread},
		{"identical small", 10, 0, 0, spread},
		{"identical at the id-list threshold", 32, 0, 0, spread},
		{"identical large", 3000, 0, 0, spread},
		{"disjoint", 0, 700, 900, spread},
		{"one extra each side", 3000, 1, 1, spread},
		{"one missing at initiator", 3000, 0, 1, spread},
		{"many differences", 2500, 300, 200, spread},
		{"all timestamps equal", 2000, 40, 60, same},
		{"all timestamps zero", 2000, 40, 60, zero},
		{"largest timestamps", 2000, 40, 60, top},
		{"timestamps 0, 1 and max", 2000, 40, 60, extremes},
		{"differences only", 0, 31, 33, same},
	}
	limits := []struct {
		name   string
		ca, cb Config
	}{
		{"unlimited", Config{}, Config{}},
		{"both 4096", Config{FrameSizeLimit: 4096}, Config{FrameSizeLimit: 4096}},
		{"responder 5000", Config{}, Config{FrameSizeLimit: 5000}},
	}
	for _, c := range cases {
		a, b := makeSets(r, c.common, c.onlyA, c.oB, c.ts)
		for _, l := range limits {
			t.Run(c.name+"/"+l.name, func(t *testing.T) {
				checkSync(t, a, b, l.ca, l.cb)
			})
		}
	}
}

// TestReconcilePrefixBounds: items at one timestamp whose ids share 31
// bytes force bounds with the longest prefixes (32 bytes). The shared items
// are common to both sides and the differences are random ids: structured
// differences (ids that differ only in a byte or two) can give equal sums
// and so equal fingerprints, which is why negentropy needs hash ids.
func TestReconcilePrefixBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var a, b []Item
	for range 100 {
		base := randomItem(r, 42)
		for j := range 6 {
			it := base
			it.ID[31] = byte(j)
			a = append(a, it)
			b = append(b, it)
		}
	}
	for range 40 {
		a = append(a, randomItem(r, 42))
		b = append(b, randomItem(r, 42))
	}
	for _, lim := range []int{0, 4096} {
		checkSync(t, a, b, Config{FrameSizeLimit: lim}, Config{FrameSizeLimit: lim})
	}
}

// TestReconcileRandom: many random pairs of sets, sizes and limits.
func TestReconcileRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	limits := []int{0, 4096, 4500, 8192, 65536}
	for i := range 100 {
		n := r.IntN(2000)
		oa, ob := r.IntN(150), r.IntN(150)
		if r.IntN(4) == 0 {
			oa, ob = 0, 0
		}
		span := []uint64{1, 10, 1000, 1 << 40}[r.IntN(4)]
		ts := func() uint64 { return r.Uint64N(span) }
		a, b := makeSets(r, n, oa, ob, ts)
		ca := Config{FrameSizeLimit: limits[r.IntN(len(limits))]}
		cb := Config{FrameSizeLimit: limits[r.IntN(len(limits))]}
		t.Run(fmt.Sprintf("%d_n%d_a%d_b%d_span%d_lim%d_%d", i, n, oa, ob, span, ca.FrameSizeLimit, cb.FrameSizeLimit), func(t *testing.T) {
			checkSync(t, a, b, ca, cb)
		})
	}
}

// TestFrameLimitBounded: with a large difference and the smallest limit,
// every message stays within it and reconciliation takes more round trips
// than without a limit, but still a bounded number.
func TestFrameLimitBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a, b := makeSets(r, 8_000, 500, 500, func() uint64 { return r.Uint64N(1 << 32) })
	free := checkSync(t, a, b, Config{}, Config{})
	lim := checkSync(t, a, b, Config{FrameSizeLimit: 4096}, Config{FrameSizeLimit: 4096})
	if lim.rounds <= free.rounds {
		t.Errorf("limited sync took %d rounds, unlimited %d: the limit did not split the work", lim.rounds, free.rounds)
	}
	if free.maxDown <= 4096 {
		t.Errorf("unlimited sync never sent more than 4096 bytes (%d): the case does not exercise the limit", free.maxDown)
	}
	// 1,000 differences of 32 bytes each way need at least this many frames.
	if minRounds := 2 * 1000 * IDSize / 4096; lim.rounds < minRounds/2 || lim.rounds > 50*minRounds {
		t.Errorf("limited sync took %d rounds, expected within [%d, %d]", lim.rounds, minRounds/2, 50*minRounds)
	}
	t.Logf("unlimited: %d rounds, %d/%d bytes; 4096-byte frames: %d rounds, %d/%d bytes",
		free.rounds, free.up, free.down, lim.rounds, lim.up, lim.down)
}

func TestVersionNegotiation(t *testing.T) {
	v, err := NewVector(nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := NewResponder(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := resp.Reconcile([]byte{0x62, 0x00, 0x00, 0x00})
	if err != nil || len(out) != 1 || out[0] != ProtocolVersion {
		t.Fatalf("responder to version 2: %x, %v; want 61", out, err)
	}
	if _, err := resp.Reconcile([]byte{0x10}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("responder to byte 0x10: %v, want ErrMalformed", err)
	}
	in, err := NewInitiator(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Initiate(); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Reconcile([]byte{0x62}); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("initiator given version 2: %v, want ErrUnsupportedVersion", err)
	}
}

func TestOutOfOrderRanges(t *testing.T) {
	v, err := NewVector([]Item{{Timestamp: 1, ID: idOf(1)}, {Timestamp: 9, ID: idOf(2)}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := NewResponder(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Bound (5, prefix 0x80) then (5, prefix 0x10): the second ends below
	// the first.
	_, err = resp.Reconcile(mustHex(t, "61 06 01 80 00 01 01 10 02 00"))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("error = %v, want ErrMalformed", err)
	}
}

func TestStateAndConfigErrors(t *testing.T) {
	items := []Item{{Timestamp: 1, ID: idOf(1)}, {Timestamp: 2, ID: idOf(2)}, {Timestamp: 3, ID: idOf(3)}}
	v, err := NewVector(items)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want error
	}{
		{Config{FrameSizeLimit: 4095}, ErrConfig},
		{Config{FrameSizeLimit: -1}, ErrConfig},
		{Config{MaxRecords: -1}, ErrConfig},
		{Config{MaxRecords: 2}, ErrTooManyRecords},
	} {
		if _, err := NewInitiator(v, c.cfg); !errors.Is(err, c.want) {
			t.Errorf("NewInitiator(%+v) = %v, want %v", c.cfg, err, c.want)
		}
		if _, err := NewResponder(v, c.cfg); !errors.Is(err, c.want) {
			t.Errorf("NewResponder(%+v) = %v, want %v", c.cfg, err, c.want)
		}
	}
	in, err := NewInitiator(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Reconcile([]byte{ProtocolVersion}); !errors.Is(err, ErrState) {
		t.Errorf("Reconcile before Initiate: %v", err)
	}
	if _, err := in.Initiate(); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Initiate(); !errors.Is(err, ErrState) {
		t.Errorf("second Initiate: %v", err)
	}
	st, err := in.Reconcile([]byte{ProtocolVersion})
	if err != nil || !st.Done() {
		t.Fatalf("empty reply should complete: %+v, %v", st, err)
	}
	if _, err := in.Reconcile([]byte{ProtocolVersion}); !errors.Is(err, ErrState) {
		t.Errorf("Reconcile after completion: %v", err)
	}
}

func TestMaxDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	a, b := makeSets(r, 100, 20, 20, func() uint64 { return r.Uint64N(1000) })
	va, _ := NewVector(a)
	vb, _ := NewVector(b)
	in, err := NewInitiator(va, Config{MaxDifferences: 30})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := NewResponder(vb, Config{})
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := in.Initiate()
	for range maxRounds {
		reply, err := resp.Reconcile(msg)
		if err != nil {
			t.Fatal(err)
		}
		st, err := in.Reconcile(reply)
		if errors.Is(err, ErrTooManyDifferences) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if st.Done() {
			t.Fatal("40 differences reconciled under a limit of 30")
		}
		msg = st.Next
	}
	t.Fatal("no convergence")
}
