package meshsync

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

// LookupReport says how a lookup went, for tests and logs.
type LookupReport struct {
	// Asked are the peers of the first stage.
	Asked []peer.ID
	// Routed counts the ids searched for by content routing, Providers
	// the providers found for them, and FoundRouted the events fetched
	// from those providers.
	Routed, Providers, FoundRouted int
	// Dialled counts the known peers dialled for the ids the first stage
	// missed, FoundDialled the events the peers of that stage served.
	Dialled, FoundDialled int
}

// Lookup answers the relay's Lookup hook: the events matching f that this
// node lacks, from the mesh (spec/mesh-placement.md, "Lookups").
//
// First it asks up to LookupPeers peers at once: for a filter naming authors,
// the holders of those authors' shards (connected ones first), then
// connected peers. Then, for a filter naming ids, the ids still missing
// are asked of up to LookupPeers peers the first stage did not ask (connected
// ones, then bootstrap peers and the address book's, dialled now), and at
// the same time (at most DHTIDs of them) searched for by content routing: the
// providers of each id's CID in the DHT (at most Providers per id, peers
// already asked left out) are asked for that id. The second stage starts
// when the first has finished or half the time has passed, whichever is
// first, so a slow peer cannot use up the whole budget; the first goes on
// meanwhile. fn is never called concurrently, and never after Lookup
// returns.
func (sc *Scheduler) Lookup(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event)) LookupReport {
	var rep LookupReport
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
	rep.Asked = sc.lookupPeers(f)
	defer func() {
		mu.Lock()
		n := len(found)
		mu.Unlock()
		sc.recordLookup(n)
	}()
	first := make(chan struct{})
	go func() {
		defer close(first)
		sc.s.Lookup(ctx, rep.Asked, *f, limit, keep)
	}()
	defer func() { <-first }()
	if f.IDs == nil {
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
	listed := make(map[[32]byte]bool, len(f.IDs))
	for _, id := range f.IDs {
		if !found[id] && !listed[id] {
			listed[id] = true
			missing = append(missing, id)
		}
	}
	mu.Unlock()
	if len(missing) == 0 {
		return rep
	}
	var stages sync.WaitGroup
	stages.Go(func() {
		rep.Dialled, rep.FoundDialled = sc.lookupKnown(ctx, f, missing, rep.Asked, keep)
	})
	if sc.cfg.Providers > 0 && sc.cfg.DHTIDs > 0 && sc.m.ContentRouting() {
		stages.Go(func() { sc.lookupProviders(ctx, f, missing[:min(len(missing), sc.cfg.DHTIDs)], &rep, keep) })
	}
	stages.Wait()
	return rep
}

// lookupProviders is the content routing stage of lookup: the providers
// of each id in missing are asked for it.
func (sc *Scheduler) lookupProviders(ctx context.Context, f *nostr.Filter, missing [][32]byte, rep *LookupReport, keep func(*nostr.Event)) {
	rep.Routed = len(missing)
	var wg sync.WaitGroup
	var rmu sync.Mutex
	for _, id := range missing {
		wg.Go(func() {
			provs, err := sc.m.FindProviders(ctx, id, sc.cfg.Providers)
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
			sc.s.Lookup(ctx, ask, one, 1, func(ev *nostr.Event) {
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
}

// lookupPeers lists up to LookupPeers peers for the first stage: the
// holders of the shards of f's authors, connected ones first (within
// each, those with standing first), then connected peers that speak the
// sync protocol, then the extra peers.
func (sc *Scheduler) lookupPeers(f *nostr.Filter) []peer.ID {
	self := sc.m.Host().ID()
	var connected, dialled []peer.ID
	if f.Authors != nil {
		pl := sc.m.Placement()
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
				if sc.m.Host().Network().Connectedness(p) == network.Connected {
					connected = append(connected, p)
				} else {
					dialled = append(dialled, p)
				}
			}
		}
	}
	preferFirst(connected, sc.prefer)
	preferFirst(dialled, sc.prefer)
	out := append(connected, dialled...)
	for _, p := range sc.syncPeers(sc.cfg.LookupPeers) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if sc.extraPeers != nil {
		for _, p := range sc.extraPeers() {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out[:min(len(out), sc.cfg.LookupPeers)]
}
