package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
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

// TestWithdrawnNodeHandsOff runs four storage parts on mocknet that keep
// nothing but their durability share (R = 3). An event a client published
// at a node that does not hold its shard is deleted there once the
// shard's holders hold it. A node that withdraws its storage offer holds
// no shard any more: the events of its old shards are deleted from its
// store once the shards' new holders hold them. At the end every holder
// holds each event, so nothing acknowledged is lost.
func TestWithdrawnNodeHandsOff(t *testing.T) {
	const count = 4
	_, parts, all := startStorageParts(t, count)
	agreeOn(t, parts, all)
	holders := holderIndexes(parts)
	heldBy := func(i int, ev *nostr.Event) bool { return parts[i].holds(t, ev.ID) }

	other := authorOn(t, func(s int) bool { return !slices.Contains(holders(s), 0) })
	visitor := note(t, other, "published at a node that does not hold its shard")
	parts[0].publish(t, visitor)
	eventually(t, 60*time.Second, "the node it was published at deletes an event of a shard it does not hold", func() bool {
		return !heldBy(0, visitor)
	})
	for _, h := range holders(mesh.ShardOf(other.PubKey())) {
		if !heldBy(h, visitor) {
			t.Fatalf("holder %d lacks the event the node it was published at deleted", h)
		}
	}

	const full = 1
	k := authorOn(t, func(s int) bool { return slices.Contains(holders(s), full) })
	var evs []*nostr.Event
	for i := range 5 {
		ev := note(t, k, fmt.Sprint("held by the node that fills up, ", i))
		parts[full].publish(t, ev)
		evs = append(evs, ev)
	}
	parts[full].mp.self.withdrawn.Store(true)
	parts[full].mp.self.resign()
	rest := slices.DeleteFunc(slices.Clone(all), func(id peer.ID) bool { return id == parts[full].h.ID() })
	agreeOn(t, parts, rest)
	eventually(t, 60*time.Second, "the node that withdrew deletes its old shards' events", func() bool {
		return !slices.ContainsFunc(evs, func(ev *nostr.Event) bool { return heldBy(full, ev) })
	})
	// Three storage nodes are left, so each holds every shard.
	for i := range parts {
		for _, ev := range evs {
			if i != full && !heldBy(i, ev) {
				t.Fatalf("node %d, now a holder of the shard, lacks %q", i, ev.Content)
			}
		}
	}
	// The count follows the deletion's commit.
	eventually(t, 10*time.Second, "the withdrawn node counts the events it handed off", func() bool {
		return parts[full].mp.rounds.Counters().HandedOff >= uint64(len(evs))
	})
}
