package node

import (
	"slices"
	"testing"
)

// TestRoutePlan: the transport chooser's order (spec/iroh.md, "Choosing a
// transport") for every combination of what the node knows of a peer.
func TestRoutePlan(t *testing.T) {
	for _, c := range []struct {
		name string
		r    route
		want []string
	}{
		{"nothing known: a libp2p dial", route{}, []string{"libp2p"}},
		{"direct libp2p, no iroh address", route{libp2p: pathDirect}, []string{"libp2p"}},
		{"direct libp2p beats direct iroh (no copy through the helper)", route{libp2p: pathDirect, iroh: true, irohPath: pathDirect}, []string{"libp2p", "iroh"}},
		{"direct libp2p beats relayed iroh", route{libp2p: pathDirect, iroh: true, irohPath: pathRelay}, []string{"libp2p", "iroh"}},
		{"direct iroh beats a libp2p circuit", route{libp2p: pathRelay, iroh: true, irohPath: pathDirect}, []string{"iroh", "libp2p"}},
		{"relayed iroh beats a libp2p circuit", route{libp2p: pathRelay, iroh: true, irohPath: pathRelay}, []string{"iroh", "libp2p"}},
		{"an iroh address beats a libp2p circuit", route{libp2p: pathRelay, iroh: true}, []string{"iroh", "libp2p"}},
		{"an iroh connection without a path yet beats a libp2p dial", route{iroh: true, irohPath: pathUnknown}, []string{"iroh", "libp2p"}},
		{"an iroh address beats a libp2p dial", route{iroh: true}, []string{"iroh", "libp2p"}},
		{"a libp2p circuit without iroh", route{libp2p: pathRelay}, []string{"libp2p"}},
	} {
		if got := c.r.plan(); !slices.Equal(got, c.want) {
			t.Errorf("%s: plan %v, want %v", c.name, got, c.want)
		}
	}
}
