package workbudget

import (
	"context"
	"testing"
	"time"
)

func TestDebt(t *testing.T) {
	now := time.Now()
	w := New(100, 1000, Work{}) // 0.1 s/s and 1,000 rows/s
	w.time.last, w.rows.last = now, now
	if d := w.Wait(now); d != 0 {
		t.Fatalf("fresh budget waits %v", d)
	}
	// One large query is allowed and leaves a debt of 6,000 rows (the
	// burst is 4,000): six seconds at 1,000 a second.
	w.Spend(now, Work{Rows: 10000})
	if d := w.Wait(now); d < 5900*time.Millisecond || d > 6100*time.Millisecond {
		t.Fatalf("after 10,000 rows: wait %v, want about 6s", d)
	}
	if d := w.Wait(now.Add(7 * time.Second)); d != 0 {
		t.Fatalf("debt not paid after 7s: wait %v", d)
	}
	// The debt is bounded.
	w.Spend(now.Add(7*time.Second), Work{Time: time.Hour})
	if d := w.Wait(now.Add(7 * time.Second)); d > DebtSeconds*time.Second {
		t.Fatalf("debt of %v is over the bound", d)
	}
}

// TestLargestChargeCounted checks that a budget made for a largest charge
// over DebtSeconds of its rate owes all of it.
func TestLargestChargeCounted(t *testing.T) {
	now := time.Now()
	w := New(0, 1000, Work{Rows: 100_000})
	w.rows.last = now
	w.Spend(now, Work{Rows: 100_000})
	if d := w.Wait(now); d < 95*time.Second {
		t.Fatalf("a 100,000-row charge at 1,000 rows/s waits %v, want 96s", d)
	}
}

// TestReserveSerialises checks that a reservation makes the next request
// wait until it is settled, no longer than ReserveDebt, and that settling
// charges what was used.
func TestReserveSerialises(t *testing.T) {
	now := time.Now()
	w := New(0, 1000, Work{Rows: 10_000})
	w.rows.last = now
	got, ok := w.Reserve(now, Work{Rows: 10_000})
	if !ok {
		t.Fatal("a full budget refused a reservation")
	}
	// 4,000 saved up and one second of debt.
	if got.Rows != 5000 {
		t.Fatalf("reserved %d rows, want 5,000", got.Rows)
	}
	if _, ok := w.Reserve(now, Work{Rows: 10_000}); ok {
		t.Fatal("a second reservation went ahead before the first was settled")
	}
	if d := w.Wait(now); d > ReserveDebt*time.Second {
		t.Fatalf("a request after a reservation waits %v, more than %ds", d, ReserveDebt)
	}
	w.Settle(now, got, Work{Rows: 1_000})
	if d := w.Wait(now); d != 0 {
		t.Fatalf("after settling 1,000 rows: wait %v, want 0", d)
	}
	if got := w.rows.tokens; got != 3000 {
		t.Fatalf("tokens after settling: %v, want 3,000 (4,000 less the 1,000 used)", got)
	}
	// A reservation that used more than it took is charged all of it.
	got, _ = w.Reserve(now, Work{Rows: 10_000})
	w.Settle(now, got, Work{Rows: 9_000})
	if d := w.Wait(now); d < 5900*time.Millisecond || d > 6100*time.Millisecond {
		t.Fatalf("after a 9,000-row listing from 3,000: wait %v, want 6s", d)
	}
	// Settling never raises a budget above its burst.
	w.Settle(now.Add(time.Hour), Work{Rows: 100_000}, Work{})
	if !w.Full(now.Add(time.Hour)) || w.rows.tokens != 4000 {
		t.Fatalf("tokens %v after an oversized refund, want the burst of 4,000", w.rows.tokens)
	}
}

// TestAdmit checks that Admit waits as long as try says and then admits,
// and gives up when its context ends.
func TestAdmit(t *testing.T) {
	calls := 0
	retry, err := Admit(context.Background(), func() time.Duration {
		calls++
		if calls < 3 {
			return time.Millisecond
		}
		return 0
	})
	if retry != 0 || err != nil || calls != 3 {
		t.Fatalf("Admit: retry %v, err %v after %d calls; want admitted after 3", retry, err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Admit(ctx, func() time.Duration { return time.Hour }); err == nil {
		t.Fatal("Admit went on after its context ended")
	}
}
