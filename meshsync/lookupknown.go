package meshsync

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/nostr"
)

// lookupKnown asks the peers the first stage of a lookup did not ask for
// the ids it missed: up to LookupPeers of them, connected peers first (one
// whose identify has not finished yet was not listed as speaking the sync
// protocol), then bootstrap peers and the address book's
// (Mesh.KnownPeers), dialled at once in parallel. Without it, a node whose
// first-stage peers lack an event answers EOSE without it although a peer
// it knows holds it: a mesh that lost the node it was formed around served
// nothing until its next maintenance round reconnected it. It returns how
// many peers it dialled and how many events they served.
func (sc *Scheduler) lookupKnown(ctx context.Context, f *nostr.Filter, missing [][32]byte, asked []peer.ID, keep func(*nostr.Event)) (dialled, served int) {
	h := sc.m.Host()
	var targets []peer.AddrInfo
	add := func(pi peer.AddrInfo) {
		if len(targets) < sc.cfg.LookupPeers && pi.ID != h.ID() && !slices.Contains(asked, pi.ID) &&
			!slices.ContainsFunc(targets, func(t peer.AddrInfo) bool { return t.ID == pi.ID }) {
			targets = append(targets, pi)
		}
	}
	for _, id := range h.Network().Peers() {
		if h.Network().Connectedness(id) == network.Connected {
			add(peer.AddrInfo{ID: id})
		}
	}
	for _, pi := range sc.m.KnownPeers(sc.cfg.LookupPeers + len(asked) + len(targets)) {
		add(pi)
	}
	if len(targets) == 0 {
		return 0, 0
	}
	var mu sync.Mutex
	var reached []peer.ID
	var wg sync.WaitGroup
	for _, pi := range targets {
		wg.Go(func() {
			if err := sc.m.Host().Connect(ctx, pi); err != nil {
				return
			}
			mu.Lock()
			reached = append(reached, pi.ID)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, pi := range targets {
		if len(pi.Addrs) > 0 {
			dialled++
		}
	}
	sc.lookupDials.Add(uint64(dialled))
	one := *f
	one.IDs = missing
	var n atomic.Int64
	sc.s.Lookup(ctx, reached, one, len(missing), func(ev *nostr.Event) {
		n.Add(1)
		keep(ev)
	})
	return dialled, int(n.Load())
}

// recordLookup counts a lookup that found found events.
func (sc *Scheduler) recordLookup(found int) {
	if found > 0 {
		sc.lookupHits.Add(1)
	} else {
		sc.lookupMisses.Add(1)
	}
}
