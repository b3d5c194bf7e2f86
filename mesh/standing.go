package mesh

import (
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"
)

// relaySample is how many relay candidates, per one wanted, are drawn
// from the verified descriptors before those with standing are put first.
const relaySample = 4

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

// preferStanding orders ps by standing here, highest first, keeping the
// order of equal ones (so, with no standing anywhere, a random sample
// stays random), and keeps at most n.
func (m *Mesh) preferStanding(ps []peer.AddrInfo, n int) []peer.AddrInfo {
	score := make(map[peer.ID]float64, len(ps))
	for _, p := range ps {
		score[p.ID] = m.standingOf(p.ID)
	}
	slices.SortStableFunc(ps, func(a, b peer.AddrInfo) int {
		switch sa, sb := score[a.ID], score[b.ID]; {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
	return ps[:min(n, len(ps))]
}
