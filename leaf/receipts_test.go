package leaf

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
)

// leafReceipts decodes Leaf.Receipts from the canonical bytes each entry
// carries.
func leafReceipts(t *testing.T, l *Leaf) []*receipt.Receipt {
	t.Helper()
	raw, err := l.Receipts()
	if err != nil {
		t.Fatal(err)
	}
	var js []receipt.JSON
	if err := json.Unmarshal(raw, &js); err != nil {
		t.Fatal(err)
	}
	out := make([]*receipt.Receipt, 0, len(js))
	for _, j := range js {
		b, err := base64.RawURLEncoding.DecodeString(j.Raw)
		if err != nil {
			t.Fatal(err)
		}
		r, err := receipt.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// intoWindow waits until the current window of length window has at
// least margin behind it and ahead of it, so what a wake counts falls in
// one window on both sides.
func intoWindow(window, margin time.Duration) {
	for {
		off := time.Duration(time.Now().UnixNano() % int64(window))
		if off >= margin && window-off >= margin {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nextWindow waits for the next window boundary, plus settle for the
// home to save the closed window.
func nextWindow(window, settle time.Duration) {
	off := time.Duration(time.Now().UnixNano() % int64(window))
	time.Sleep(window - off + settle)
}

func syncOK(t *testing.T, l *Leaf) *Summary {
	t.Helper()
	s, err := l.Sync(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Error != "" {
		t.Fatalf("wake: %s", s.Error)
	}
	return s
}

// A leaf and a real home, windows of two seconds: the leaf picks up in
// one window, sleeps over its close, and at its next wake proposes the
// receipt; then sleeps over two more closes. After each wake both sides
// hold the same co-signed, chained receipts, with the pickups counted
// alike.
// It runs with the leaf's DID sorting first (the leaf is a, as a
// proposer between nodes is) and second (the leaf proposes as b).
func TestLeafReceiptsAcrossWindows(t *testing.T) {
	for _, first := range []bool{true, false} {
		t.Run(map[bool]string{true: "leaf-is-a", false: "leaf-is-b"}[first], func(t *testing.T) {
			t.Parallel()
			testReceiptsAcrossWindows(t, first)
		})
	}
}

// keysSorting returns a key store whose DID sorts before other when first
// is set, else after it.
func keysSorting(t *testing.T, other string, first bool) *memKeys {
	t.Helper()
	for {
		k := &memKeys{}
		seed, err := k.Seed()
		if err != nil {
			t.Fatal(err)
		}
		key, err := identity.KeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		if (key.DID() < other) == first {
			return k
		}
	}
}

func testReceiptsAcrossWindows(t *testing.T, first bool) {
	const window = 2 * time.Second
	h := newAccountingHome(t, window)
	cfg := NewConfig(t.TempDir())
	cfg.WindowSecs, cfg.BudgetMs = 2, 10_000
	l, err := New(cfg, keysSorting(t, h.key.DID(), first))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Pair(h.invitation(h.addr)); err != nil {
		t.Fatal(err)
	}
	syncOK(t, l) // mediation granted: nothing to count yet
	s := newSender(t)

	picked := []int{3, 5}
	for i, n := range picked {
		intoWindow(window, 400*time.Millisecond)
		h.queue(t, s, l.DID(), n)
		sum := syncOK(t, l)
		if sum.PickedUp != int64(n) {
			t.Fatalf("wake %d picked up %d, want %d", i, sum.PickedUp, n)
		}
		if i > 0 && sum.Receipts != 1 {
			t.Fatalf("wake %d co-signed %d receipts, want 1 (the window before): %s", i, sum.Receipts, sum.JSON())
		}
		nextWindow(window, window/2) // asleep over the close
	}
	nextWindow(window, window/2) // and over one more, with nothing served
	sum := syncOK(t, l)
	if sum.Receipts != 1 || sum.ReceiptsLeft != 0 {
		t.Fatalf("last wake: %s", sum.JSON())
	}

	mine := leafReceipts(t, l)
	theirs, err := h.acct.Receipts(l.DID())
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != len(picked) || len(theirs) != len(picked) {
		t.Fatalf("leaf holds %d receipts, home %d, want %d each", len(mine), len(theirs), len(picked))
	}
	for i := range mine {
		a, _ := mine[i].Encode()
		b, _ := theirs[i].Encode()
		if !bytes.Equal(a, b) {
			t.Fatalf("receipt %d differs between the leaf and its home", i)
		}
		if got := mine[i].Side(l.DID()).Received.MediationMessages; got != uint64(picked[i]) {
			t.Fatalf("receipt %d: the leaf received %d mediated messages, want %d", i, got, picked[i])
		}
		if got := mine[i].Side(h.key.DID()).Gave.MediationMessages; got != uint64(picked[i]) {
			t.Fatalf("receipt %d: the home gave %d mediated messages, want %d", i, got, picked[i])
		}
	}
	for _, rs := range [][]*receipt.Receipt{mine, theirs} {
		if n, err := receipt.VerifyChain(l.DID(), rs); err != nil || n != len(picked) {
			t.Fatalf("chain: %d verified, %v", n, err)
		}
	}
}

// A wake whose budget is nearly spent when the pickup ends leaves the
// receipt exchange to the next wake, which does it.
func TestLeafReceiptsDeferredWhenBudgetSpent(t *testing.T) {
	const window = 2 * time.Second
	h := newAccountingHome(t, window)
	cfg := NewConfig(t.TempDir())
	cfg.WindowSecs = 2
	cfg.BudgetMs = (receiptReserve + 100*time.Millisecond).Milliseconds() // deadline 10% short of it
	l, err := New(cfg, &memKeys{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Pair(h.invitation(h.addr)); err != nil {
		t.Fatal(err)
	}
	syncOK(t, l)
	intoWindow(window, 400*time.Millisecond)
	h.queue(t, newSender(t), l.DID(), 4)
	syncOK(t, l)
	nextWindow(window, window/2)

	start := time.Now()
	sum := syncOK(t, l)
	if sum.Receipts != 0 || sum.ReceiptsLeft != 1 {
		t.Fatalf("short wake: %s, want the exchange deferred", sum.JSON())
	}
	if d := time.Since(start); d > time.Duration(cfg.BudgetMs)*time.Millisecond {
		t.Fatalf("short wake took %s, past its budget", d)
	}
	l.cfg.BudgetMs = 10_000
	sum = syncOK(t, l)
	if sum.Receipts != 1 || sum.ReceiptsLeft != 0 {
		t.Fatalf("next wake: %s, want the deferred receipt", sum.JSON())
	}
	if rs := leafReceipts(t, l); len(rs) != 1 || rs[0].Side(l.DID()).Received.MediationMessages != 4 {
		t.Fatalf("leaf receipts: %+v", rs)
	}
}
