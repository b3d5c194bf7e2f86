package node

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
)

// lookupReport says how a lookup went, for tests and logs.
type lookupReport struct {
	// Asked are the peers of the first stage.
	Asked []peer.ID
	// Routed counts the ids searched for by content routing, Providers
	// the providers found for them, and FoundRouted the events fetched
	// from those providers.
	Routed, Providers, FoundRouted int
}

// lookup answers the relay's Lookup hook: the events matching f that this
// node lacks, from the mesh (spec/mesh-placement.md, "Lookups").
//
// First it asks up to lookups peers at once: for a filter naming authors,
// the holders of those authors' shards (connected ones first), then
// connected peers. Then, for a filter naming ids, the ids still missing
// (at most dhtIDs of them) are searched for by content routing: the
// providers of each id's CID in the DHT (at most providers per id, peers
// already asked left out) are asked for that id. The second stage starts
// when the first has finished or half the time has passed, whichever is
// first, so a slow peer cannot use up the whole budget; the first goes on
// meanwhile. fn is never called concurrently, and never after lookup
// returns.
func (mp *meshPart) lookup(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event)) lookupReport {
	var rep lookupReport
	var mu sync.Mutex
	found := map[[32]byte]bool{}
	keep := func(ev *nostr.Event) {
		mu.Lock()
		defer mu.Unlock()
		if found[ev.ID] || ctx.Err() != nil {
			return
		}
		found[ev.ID] = true
		fn(ev)
	}
	rep.Asked = mp.lookupPeers(f)
	first := make(chan struct{})
	go func() {
		defer close(first)
		mp.sync.Lookup(ctx, rep.Asked, *f, limit, keep)
	}()
	defer func() { <-first }()
	if f.IDs == nil || mp.providers <= 0 || mp.dhtIDs <= 0 || !mp.m.ContentRouting() {
		return rep
	}
	var half <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(dl) / 2)
		defer t.Stop()
		half = t.C
	}
	select {
	case <-first:
	case <-half:
	case <-ctx.Done():
		return rep
	}
	mu.Lock()
	var missing [][32]byte
	for _, id := range f.IDs {
		if !found[id] && !slices.Contains(missing, id) && len(missing) < mp.dhtIDs {
			missing = append(missing, id)
		}
	}
	mu.Unlock()
	rep.Routed = len(missing)
	var wg sync.WaitGroup
	var rmu sync.Mutex
	for _, id := range missing {
		wg.Go(func() {
			provs, err := mp.m.FindProviders(ctx, id, mp.providers)
			if err != nil {
				return
			}
			var ask []peer.ID
			for _, p := range provs {
				if !slices.Contains(rep.Asked, p.ID) {
					ask = append(ask, p.ID)
				}
			}
			one := *f
			one.IDs = [][32]byte{id}
			n := 0
			mp.sync.Lookup(ctx, ask, one, 1, func(ev *nostr.Event) {
				n++
				keep(ev)
			})
			rmu.Lock()
			rep.Providers += len(provs)
			rep.FoundRouted += n
			rmu.Unlock()
		})
	}
	wg.Wait()
	return rep
}

// lookupPeers lists up to mp.lookups peers for the first stage: the
// holders of the shards of f's authors, connected ones first, then
// connected peers that speak the sync protocol.
func (mp *meshPart) lookupPeers(f *nostr.Filter) []peer.ID {
	self := mp.m.Host().ID()
	var connected, dialled []peer.ID
	if f.Authors != nil {
		pl := mp.m.Placement()
		seen := map[int]bool{}
		for _, a := range f.Authors {
			s := mesh.ShardOf(a)
			if seen[s] {
				continue
			}
			seen[s] = true
			for _, p := range pl.Holders(s) {
				if p == self || slices.Contains(connected, p) || slices.Contains(dialled, p) {
					continue
				}
				if mp.m.Host().Network().Connectedness(p) == network.Connected {
					connected = append(connected, p)
				} else {
					dialled = append(dialled, p)
				}
			}
		}
	}
	out := append(connected, dialled...)
	for _, p := range mp.syncPeers(mp.lookups) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if mp.irohPeers != nil {
		for _, p := range mp.irohPeers() {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out[:min(len(out), mp.lookups)]
}
