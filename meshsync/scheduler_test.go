package meshsync

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/mesh/placement"
	"fleetmesh.org/fleetmesh/nostr"
)

// fakeMesh is a Mesh with no placement and no content routing, whose
// address book is known.
type fakeMesh struct {
	h     host.Host
	known []peer.AddrInfo
}

func (f fakeMesh) Host() host.Host                   { return f.h }
func (f fakeMesh) Placement() placement.Placement    { return placement.Placement{} }
func (f fakeMesh) Durable() []int                    { return nil }
func (f fakeMesh) PlacementChanges() <-chan struct{} { return nil }
func (f fakeMesh) ReportUnreachable(peer.ID)         {}
func (f fakeMesh) HoldsDurable(int) bool             { return false }
func (f fakeMesh) Interested(int) bool               { return false }
func (f fakeMesh) KnownPeers(n int) []peer.AddrInfo  { return f.known[:min(n, len(f.known))] }
func (f fakeMesh) ContentRouting() bool              { return false }
func (f fakeMesh) FindProviders(context.Context, [32]byte, int) ([]peer.AddrInfo, error) {
	return nil, nil
}

// TestLookupDialsKnownPeers checks a lookup's second stage: an id that
// the connected peers lack is asked of a peer the address book knows but
// the node is not connected to, which is dialled for it; the counters
// record the hit and the dial, and a lookup that finds nothing a miss.
func TestLookupDialsKnownPeers(t *testing.T) {
	mn, nodes := newMesh(t, 3)
	hosts := mn.Hosts()
	asker, holder := hosts[0], hosts[1]
	if err := mn.DisconnectPeers(asker.ID(), holder.ID()); err != nil {
		t.Fatal(err)
	}
	k, _ := nostr.GenerateSecretKey()
	ev := signed(t, k, time.Now().Unix(), 1, "held by one known peer")
	nodes[1].add(t, ev)

	m := fakeMesh{h: asker, known: []peer.AddrInfo{{ID: holder.ID(), Addrs: holder.Addrs()}}}
	sc := NewScheduler(nodes[0].svc, m, SchedulerConfig{LookupPeers: 4}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []*nostr.Event
	rep := sc.Lookup(ctx, &nostr.Filter{IDs: [][32]byte{ev.ID}}, 1, func(e *nostr.Event) { got = append(got, e) })
	if len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("lookup found %d events (report %+v)", len(got), rep)
	}
	if rep.Dialled != 1 || rep.FoundDialled != 1 {
		t.Fatalf("the known peer was not dialled for the event: %+v", rep)
	}
	other := signed(t, k, time.Now().Unix(), 1, "held by nobody")
	if rep := sc.Lookup(ctx, &nostr.Filter{IDs: [][32]byte{other.ID}}, 1, func(*nostr.Event) { t.Error("found an event nobody holds") }); rep.FoundDialled != 0 {
		t.Fatalf("report %+v for an event nobody holds", rep)
	}
	c := sc.Counters()
	// The second lookup finds the holder connected since the first, so
	// it dials nobody.
	if c.LookupHits != 1 || c.LookupMisses != 1 || c.LookupDials != 1 {
		t.Fatalf("counters %+v, want 1 hit, 1 miss, 1 dial", c)
	}
}
