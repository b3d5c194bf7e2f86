package mesh

import (
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
