package mesh

import (
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestStandingScore: GossipSub's application score is 0 before standing
// is set and for a peer with none, and follows standing within [0, 1]
// after, however f strays; the weight gives a trusted peer a score above
// the opportunistic graft threshold and never a penalty.
func TestStandingScore(t *testing.T) {
	var m Mesh
	params := peerScoreParams(m.standingOf)
	if got := params.AppSpecificScore("a"); got != 0 {
		t.Fatalf("before SetStanding: %v", got)
	}
	m.SetStanding(func(p peer.ID) float64 {
		return map[peer.ID]float64{"trusted": 1, "some": 0.4, "over": 7, "under": -3}[p]
	})
	for _, tc := range []struct {
		p    peer.ID
		want float64
	}{{"trusted", 1}, {"some", 0.4}, {"over", 1}, {"under", 0}, {"stranger", 0}} {
		if got := params.AppSpecificScore(tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.p, got, tc.want)
		}
	}
	if w := params.AppSpecificWeight; w <= 0 || w*1 <= opportunisticGraftThreshold || w*1 >= acceptPXThreshold {
		t.Errorf("weight %v: a trusted peer must score above %v and below %v", w, opportunisticGraftThreshold, acceptPXThreshold)
	}
}

// TestPreferStanding: relay candidates with standing come first, the
// rest keep their (random) order, and at most n are kept.
func TestPreferStanding(t *testing.T) {
	var m Mesh
	ps := func(ids ...peer.ID) []peer.AddrInfo {
		out := make([]peer.AddrInfo, len(ids))
		for i, id := range ids {
			out[i].ID = id
		}
		return out
	}
	ids := func(as []peer.AddrInfo) []peer.ID {
		out := make([]peer.ID, len(as))
		for i, a := range as {
			out[i] = a.ID
		}
		return out
	}
	if got := ids(m.preferStanding(ps("d", "c", "b", "a"), 3)); !slices.Equal(got, []peer.ID{"d", "c", "b"}) {
		t.Fatalf("no standing: %v", got)
	}
	m.SetStanding(func(p peer.ID) float64 { return map[peer.ID]float64{"a": 0.5, "b": 1}[p] })
	if got := ids(m.preferStanding(ps("d", "c", "b", "a"), 3)); !slices.Equal(got, []peer.ID{"b", "a", "d"}) {
		t.Fatalf("with standing: %v", got)
	}
}
