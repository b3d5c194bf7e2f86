package node

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
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

// TestWithdrawnNodeLeavesPlacement runs four mesh parts on mocknet: once
// one withdraws its storage offer (as watchStorage does near the bound)
// every part, that one included, places the shards over the other three
// and it holds none; offered again, it is back in the placement.
func TestWithdrawnNodeLeavesPlacement(t *testing.T) {
	const count = 4
	_, parts, all := startStorageParts(t, count)
	agreeOn(t, parts, all)

	full := parts[1]
	full.mp.self.withdrawn.Store(true)
	full.mp.self.resign()
	agreeOn(t, parts, slices.DeleteFunc(slices.Clone(all), func(id peer.ID) bool { return id == full.h.ID() }))
	if held := full.mp.m.Durable(); len(held) != 0 {
		t.Fatalf("the node that withdrew its offer still holds %d durable shards", len(held))
	}

	full.mp.self.withdrawn.Store(false)
	full.mp.self.resign()
	agreeOn(t, parts, all)
}
