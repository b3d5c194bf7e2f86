package node

import (
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/identity"
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

// TestPickRelays: connected anchors first, then an order only this node
// knows; a stranger's early-sorting URLs take no slot ahead of them, and
// two nodes order the same strangers differently.
func TestPickRelays(t *testing.T) {
	ids := make([]peer.ID, 40)
	for i := range ids {
		k, _ := identity.GenerateKey()
		ids[i] = k.PeerID()
	}
	honest := []relayCandidate{
		{id: ids[0], url: "https://z-honest-1.example/", connected: true},
		{id: ids[1], url: "https://z-honest-2.example/", connected: true},
	}
	var cands []relayCandidate
	for i, id := range ids[2:] {
		cands = append(cands, relayCandidate{id: id, url: "https://a-stranger-" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ".example/"})
	}
	cands = append(cands, honest...)
	keyA, keyB := relayKeyFor([]byte("node a's seed")), relayKeyFor([]byte("node b's seed"))
	a := pickRelays(keyA, cands, 4)
	if len(a) != 4 || !slices.Contains(a[:2], honest[0].url) || !slices.Contains(a[:2], honest[1].url) {
		t.Fatalf("picked %v: the connected anchors must come first", a)
	}
	if again := pickRelays(keyA, slices.Clone(cands), 4); !slices.Equal(again, a) {
		t.Fatalf("the order flaps: %v then %v", a, again)
	}
	slices.Reverse(cands)
	if rev := pickRelays(keyA, cands, 4); !slices.Equal(rev, a) {
		t.Fatalf("the order depends on the input order: %v then %v", a, rev)
	}
	// Nobody else can tell which strangers a node takes: another key
	// orders them differently (with 38 strangers, the same two by chance
	// is unlikely: 1 in 703).
	b := pickRelays(keyB, cands, 4)
	if slices.Equal(a[2:], b[2:]) {
		t.Fatalf("two nodes took the same strangers %v: the order is not keyed", a[2:])
	}
	// URL order plays no part: the earliest URL is not always taken.
	sorted := slices.Clone(cands)
	slices.SortFunc(sorted, func(x, y relayCandidate) int {
		if x.url < y.url {
			return -1
		}
		return 1
	})
	if a[2] == sorted[0].url && b[2] == sorted[0].url && slices.Contains(a, sorted[1].url) && slices.Contains(b, sorted[1].url) {
		t.Fatalf("both nodes took the earliest URLs %v, %v", a, b)
	}
	// One URL offered by several anchors is taken once.
	dup := []relayCandidate{{id: ids[0], url: "https://same.example/"}, {id: ids[1], url: "https://same.example/"}, {id: ids[2], url: "https://other.example/"}}
	if got := pickRelays(keyA, dup, 4); len(got) != 2 {
		t.Fatalf("picked %v from two URLs", got)
	}
	if got := pickRelays(keyA, cands, 0); len(got) != 0 {
		t.Fatalf("max 0 picked %v", got)
	}
}
