package node

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

// TestReprovidePass: one pass over the store queues the announcement of
// every stored event in a shard the node holds, exactly once, and of none
// elsewhere, across pages that split a second holding more events than a
// page.
func TestReprovidePass(t *testing.T) {
	_, parts := startParts(t, 2, func(i int, parts []*testPart) partSpec {
		s := testSpec()
		s.mesh.DHT = mesh.DHTServer
		s.mesh.DisableTopicDiscovery = true
		s.mesh.Durability.Replication = 1
		if i > 0 {
			s.mesh.Bootstrap = []string{parts[0].p2pAddr()}
		}
		return s
	})
	agreeOn(t, parts, []peer.ID{parts[0].h.ID(), parts[1].h.ID()})
	p := parts[0]
	held := authorOn(t, func(s int) bool { return p.mp.m.HoldsDurable(s) })
	other := authorOn(t, func(s int) bool { return !p.mp.m.HoldsDurable(s) })

	// Saved straight into the store, so nothing announced them yet: 520
	// held events in one second (more than a page), 100 more spread out,
	// and 50 of an author whose shard the node does not hold.
	want := 0
	save := func(k nostr.SecretKey, createdAt int64, i int) {
		ev := &nostr.Event{CreatedAt: createdAt, Kind: 1, Tags: nostr.Tags{}, Content: time.Unix(createdAt, 0).String() + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))}
		if err := k.Sign(ev); err != nil {
			t.Fatal(err)
		}
		if res, err := p.st.Save(context.Background(), ev); err != nil || res != store.Stored {
			t.Fatalf("save: %v %v", res, err)
		}
	}
	const busySecond = 1_700_000_500
	for i := range 520 {
		save(held, busySecond, i)
		want++
	}
	for i := range 100 {
		save(held, 1_700_000_000+int64(i*3), i)
		want++
	}
	for i := range 50 {
		save(other, 1_700_000_001+int64(i), i)
	}
	before := p.mp.m.Stats().ProvideQueued
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	queued, err := p.mp.reprovidePass(ctx, p.st)
	if err != nil {
		t.Fatal(err)
	}
	if queued != want {
		t.Errorf("the pass queued %d announcements, want %d", queued, want)
	}
	if got := p.mp.m.Stats().ProvideQueued - before; got != uint64(want) {
		t.Errorf("the provider took %d new CIDs, want %d (each event once)", got, want)
	}
}
