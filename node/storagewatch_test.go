package node

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

func TestStorageWithdrawn(t *testing.T) {
	const bound = 1000
	for _, tc := range []struct {
		was       bool
		used, max uint64
		withdrawn bool
	}{
		{false, 0, 0, false},       // unbounded
		{true, 5000, 0, false},     // unbounded
		{false, 899, bound, false}, // below the high mark
		{false, 900, bound, true},  // at it
		{true, 850, bound, true},   // between the marks: stays
		{false, 850, bound, false}, // between the marks: stays
		{true, 799, bound, false},  // below the low mark
		{false, 2000, bound, true}, // over the bound
	} {
		if got := storageWithdrawn(tc.was, tc.used, tc.max); got != tc.withdrawn {
			t.Errorf("storageWithdrawn(%v, %d, %d) = %v, want %v", tc.was, tc.used, tc.max, got, tc.withdrawn)
		}
	}
}

// TestWatchStorageResigns: a store nearly at its bound withdraws the
// offer and asks for a new signature at once.
func TestWatchStorageResigns(t *testing.T) {
	sd := &selfDescriptor{changed: make(chan struct{}, 1), log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sd.watchStorage(ctx, func() uint64 { return 950 }, func() uint64 { return 1000 })
	}()
	select {
	case <-sd.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no re-sign asked for")
	}
	cancel()
	<-done
	if !sd.withdrawn.Load() {
		t.Fatal("the storage offer was not withdrawn at 95 % of the bound")
	}
}
