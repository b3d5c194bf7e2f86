package mesh

import (
	"crypto/sha256"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestEventCIDVector checks the event CID of spec/mesh-placement.md
// against a value computed elsewhere: an id equal to SHA-256 of the empty
// string has the CID IPFS gives an empty raw block.
func TestEventCIDVector(t *testing.T) {
	id := sha256.Sum256(nil)
	const want = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	if got := nostr.IDToCID(id).String(); got != want {
		t.Fatalf("CID of id %x = %s, want %s", id, got, want)
	}
}

// TestProvideQueue checks the announcement queue's bounds: first in,
// first out, in batches of at most the batch size; an id already queued
// is not queued twice; beyond the bound ids are dropped and counted.
func TestProvideQueue(t *testing.T) {
	cfg := testConfig()
	cfg.Durability.ProvideQueue = 3
	m := &Mesh{cfg: cfg.withDefaults(), stats: newCounters(8)}
	p := newProvider(m)
	ids := make([][32]byte, 5)
	for i := range ids {
		ids[i][0] = byte(i + 1)
	}
	steps := []struct {
		id   [32]byte
		want bool
	}{
		{ids[0], true},
		{ids[1], true},
		{ids[0], true}, // already queued
		{ids[2], true},
		{ids[3], false}, // full
	}
	for i, s := range steps {
		if got := p.enqueue(s.id); got != s.want {
			t.Fatalf("step %d: enqueue = %v, want %v", i, got, s.want)
		}
	}
	st := m.Stats()
	if st.ProvideQueued != 3 || st.ProvideDropped != 1 {
		t.Fatalf("queued %d, dropped %d; want 3 and 1", st.ProvideQueued, st.ProvideDropped)
	}
	if got := p.take(2); len(got) != 2 || got[0] != ids[0] || got[1] != ids[1] {
		t.Fatalf("first batch %x", got)
	}
	if !p.enqueue(ids[0]) || !p.enqueue(ids[4]) {
		t.Fatal("room freed by a batch was not reused")
	}
	if got := p.take(10); len(got) != 3 || got[0] != ids[2] || got[1] != ids[0] || got[2] != ids[4] {
		t.Fatalf("second batch %x", got)
	}
	if got := p.take(10); len(got) != 0 {
		t.Fatalf("an empty queue gave %d ids", len(got))
	}
}
