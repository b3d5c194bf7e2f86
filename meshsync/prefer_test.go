package meshsync

import (
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestPreferFirst: peers with standing move to the front, each group
// keeping its (shuffled) order; without a preference nothing moves, and
// peers without standing are still listed.
func TestPreferFirst(t *testing.T) {
	trusted := func(ps ...peer.ID) func(peer.ID) bool {
		return func(p peer.ID) bool { return slices.Contains(ps, p) }
	}
	for _, tc := range []struct {
		name   string
		in     []peer.ID
		prefer func(peer.ID) bool
		want   []peer.ID
	}{
		{"no preference", []peer.ID{"c", "a", "b"}, nil, []peer.ID{"c", "a", "b"}},
		{"none trusted", []peer.ID{"c", "a", "b"}, trusted(), []peer.ID{"c", "a", "b"}},
		{"one trusted moves first", []peer.ID{"c", "a", "b"}, trusted("b"), []peer.ID{"b", "c", "a"}},
		{"order kept within groups", []peer.ID{"d", "c", "a", "b"}, trusted("a", "d"), []peer.ID{"d", "a", "c", "b"}},
		{"all trusted", []peer.ID{"c", "a"}, trusted("a", "c"), []peer.ID{"c", "a"}},
	} {
		got := slices.Clone(tc.in)
		preferFirst(got, tc.prefer)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
