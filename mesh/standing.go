package mesh

import "github.com/libp2p/go-libp2p/core/peer"

// SetStanding has GossipSub score each peer by its node's standing here
// (spec/standing.md "Use"): f returns from 0 (none) to 1 (trusted), and
// the peer's score gains that times standingWeight. It is called on
// GossipSub's hot path, so f should read a snapshot, not compute.
func (m *Mesh) SetStanding(f func(peer.ID) float64) { m.standing.Store(&f) }

// standingOf is GossipSub's application-specific score: f's, kept within
// [0, 1], or 0 before SetStanding.
func (m *Mesh) standingOf(p peer.ID) float64 {
	f := m.standing.Load()
	if f == nil {
		return 0
	}
	return min(1, max(0, (*f)(p)))
}
