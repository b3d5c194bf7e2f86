package mesh

import (
	"github.com/libp2p/go-libp2p/core/peer"
)

// KnownPeers returns up to n peers this node knows how to reach, connected
// or not: bootstrap peers first, then the address book's, most recently
// seen first. The DHT bootstraps from them, and a lookup that missed among
// the peers it asked first asks these next (spec/mesh-placement.md,
// "Lookups").
func (m *Mesh) KnownPeers(n int) []peer.AddrInfo {
	var out []peer.AddrInfo
	seen := map[peer.ID]bool{m.h.ID(): true}
	take := func(pi peer.AddrInfo) {
		if len(out) >= n || seen[pi.ID] || len(pi.Addrs) == 0 {
			return
		}
		seen[pi.ID] = true
		out = append(out, pi)
	}
	for _, b := range m.boot {
		take(b)
	}
	for _, e := range m.book.Recent(0) {
		if len(out) >= n {
			break
		}
		take(peer.AddrInfo{ID: e.ID, Addrs: e.Addrs})
	}
	return out
}

// AddrBookLen is the number of peers in the address book.
func (m *Mesh) AddrBookLen() int { return m.book.Len() }
