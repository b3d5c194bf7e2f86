package meshsync

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/placement"
	"fleetmesh.org/fleetmesh/nostr"
)

// holderMesh is a Mesh whose placement is over given storage nodes and
// whose durable shards are what holds says.
type holderMesh struct {
	fakeMesh
	pl    placement.Placement
	holds func(int) bool
}

func (m holderMesh) Placement() placement.Placement { return m.pl }
func (m holderMesh) HoldsDurable(s int) bool        { return m.holds(s) }

// TestHandOffRound runs one node that holds no shard beside two that hold
// every one (R = 2 over those two): what the first stores and need not
// keep goes to both holders and is then deleted there; what its own
// filters match, what the boundary keeps from replicating, and everything
// while a holder does not hold the shard by its own placement, stays.
func TestHandOffRound(t *testing.T) {
	mn, nodes := newMesh(t, 3)
	hosts := mn.Hosts()
	pl, err := placement.New(2, mesh.ShardCount, []peer.ID{hosts[1].ID(), hosts[2].ID()})
	if err != nil {
		t.Fatal(err)
	}
	holding := true
	for i := 1; i < 3; i++ {
		NewScheduler(nodes[i].svc, holderMesh{fakeMesh{h: hosts[i]}, pl, func(int) bool { return holding }}, SchedulerConfig{}, nil)
	}
	// The first node's filters take kind 7 only.
	sc := NewScheduler(nodes[0].svc, holderMesh{fakeMesh{h: hosts[0]}, pl, func(int) bool { return false }},
		SchedulerConfig{Filters: []nostr.Filter{{Kinds: []int{7}}}}, nil)

	k, _ := nostr.GenerateSecretKey()
	a, b, c := nodes[0], nodes[1], nodes[2]
	lacked := signed(t, k, 100, 1, "only here")
	half := signed(t, k, 101, 1, "here and at one holder")
	both := signed(t, k, 102, 1, "everywhere")
	old := signed(t, k, 103, 0, `{"name":"old"}`)
	newer := signed(t, k, 104, 0, `{"name":"newer"}`)
	mine := signed(t, k, 105, 7, "+")
	for _, ev := range []*nostr.Event{lacked, half, both, old, mine} {
		a.add(t, ev)
	}
	b.add(t, half)
	for _, n := range []*testNode{b, c} {
		n.add(t, both)
		n.add(t, newer)
	}
	// The boundary lets this one replicate nowhere; it was stored at the
	// first node before its rules said so.
	secret := signed(t, k, 106, 1, "nsec1"+strings.Repeat("q", 58))
	if _, err := a.local.Store.Save(context.Background(), secret); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	holding = false
	sc.handOffRound(ctx)
	if got := len(a.ids(t)); got != 6 {
		t.Fatalf("holders that do not hold the shard by their own placement took a hand-off: %d of 6 events left", got)
	}
	holding = true
	sc.handOffRound(ctx)
	ids := a.ids(t)
	for name, want := range map[string]struct {
		ev   *nostr.Event
		kept bool
	}{
		"lacked by both": {lacked, false}, "held by one": {half, false}, "held by both": {both, false},
		"superseded at both": {old, false}, "matching its filters": {mine, true}, "refused by the boundary": {secret, true},
	} {
		if ids[want.ev.ID] != want.kept {
			t.Errorf("%s: kept = %v, want %v", name, ids[want.ev.ID], want.kept)
		}
	}
	for name, n := range map[string]*testNode{"b": b, "c": c} {
		held := n.ids(t)
		for _, ev := range []*nostr.Event{lacked, half, both, newer} {
			if !held[ev.ID] {
				t.Errorf("holder %s lacks %q after the hand-off", name, ev.Content)
			}
		}
	}
	if got := sc.Counters().HandedOff; got != 4 {
		t.Errorf("counted %d events handed off, want 4", got)
	}
}

// TestHandOffEpoch checks the rule that keeps two nodes from deleting an
// event each on the other's word: once a node takes a hand-off of a
// shard, a deletion of that shard's events it confirmed before is not
// carried out, and a node takes a hand-off only of shards it holds.
func TestHandOffEpoch(t *testing.T) {
	var h handOffs
	if err := h.accept([]int{3}); err == nil {
		t.Fatal("a hand-off was taken before the node knew what it holds")
	}
	held := map[int]bool{3: true, 4: true}
	h.setHolds(func(s int) bool { return held[s] })
	since := h.epochs([]int{3, 5})
	if err := h.accept([]int{3, 5}); err == nil || !strings.HasPrefix(err.Error(), "blocked: ") {
		t.Fatalf("a hand-off of a shard not held: %v", err)
	}
	if err := h.accept([]int{3, 4}); err != nil {
		t.Fatal(err)
	}
	var deleted [][32]byte
	del := func(ids [][32]byte) error { deleted = ids; return nil }
	byShard := map[int][][32]byte{3: {{3}}, 5: {{5}}, 6: {{6}}}
	since[6] = 0
	if err := h.deleteIf(byShard, since, func(s int) bool { return s != 6 }, del); err != nil {
		t.Fatal(err)
	}
	// Shard 3 took a hand-off since, shard 6 is kept again: only shard 5's
	// event goes.
	if len(deleted) != 1 || deleted[0] != [32]byte{5} {
		t.Fatalf("deleted %v, want only the event of shard 5", deleted)
	}
}

// TestHandOffCandidatesCrowdedSecond reads a store whose events mostly
// share one second, more than a page of them: one round picks every event
// exactly once, and the next round starts again from the newest.
func TestHandOffCandidatesCrowdedSecond(t *testing.T) {
	mn, nodes := newMesh(t, 1)
	sc := NewScheduler(nodes[0].svc, holderMesh{fakeMesh{h: mn.Hosts()[0]}, placement.Placement{}, func(int) bool { return false }}, SchedulerConfig{}, nil)
	k, _ := nostr.GenerateSecretKey()
	want := map[[32]byte]bool{}
	save := func(ev *nostr.Event) {
		if _, err := nodes[0].local.Store.Save(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		want[ev.ID] = true
	}
	for i := range handOffPage + 20 {
		save(signed(t, k, 1000, 1, fmt.Sprint("crowded ", i)))
	}
	for i := range 10 {
		save(signed(t, k, 999-int64(i), 1, fmt.Sprint("older ", i)))
	}
	for round := range 2 {
		cands, err := sc.handOffCandidates(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := map[[32]byte]bool{}
		for _, ids := range cands {
			for _, id := range ids {
				if got[id] {
					t.Fatalf("round %d picked an event twice", round)
				}
				got[id] = true
			}
		}
		if len(got) != len(want) {
			t.Fatalf("round %d picked %d of %d events", round, len(got), len(want))
		}
	}
}
