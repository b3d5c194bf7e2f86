package meshsync

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"fleetmesh.org/fleetmesh/nostr"
)

// lookupKnown asks the peers the first stage of a lookup did not ask for
// the ids it missed: up to LookupPeers of them, connected peers first (one
// whose identify has not finished yet was not listed as speaking the sync
// protocol), then bootstrap peers and the address book's
// (Mesh.KnownPeers), each dialled as it is asked, all in parallel, so a
// dead one holds up no other (and is then left out of lookups, like any
// peer that does not answer). Without it, a node whose first-stage peers
// lack an event answers EOSE without it although a peer it knows holds
// it: a mesh that lost the node it was formed around served nothing until
// its next maintenance round reconnected it. It returns how many peers it
// dialled and how many events they served.
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
	ids := make([]peer.ID, len(targets))
	dials := map[peer.ID]bool{}
	for i, pi := range targets {
		ids[i] = pi.ID
		if len(pi.Addrs) > 0 {
			// Opening the lookup's stream dials these addresses.
			h.Peerstore().AddAddrs(pi.ID, pi.Addrs, peerstore.TempAddrTTL)
			dials[pi.ID] = true
		}
	}
	one := *f
	one.IDs = missing
	var n atomic.Int64
	for _, p := range sc.s.Lookup(ctx, ids, one, len(missing), func(ev *nostr.Event) {
		n.Add(1)
		keep(ev)
	}) {
		if dials[p] {
			dialled++
		}
	}
	sc.lookupDials.Add(uint64(dialled))
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
