package standing

import "sort"

// Reader is what other packages read standing through: a node's
// standing from this node's point of view, from 0 (none: a stranger, a
// Sybil, a wall) to 1. View implements it.
type Reader interface {
	Of(did string) float64
}

// Trusted reports whether did's standing is at least threshold (a
// node's is Config.Trusted). Services prefer trusted nodes; they never
// refuse a node for having none (spec/standing.md "Use").
func Trusted(r Reader, did string, threshold float64) bool {
	return r != nil && r.Of(did) >= threshold
}

// Order sorts dids by standing, highest first, keeping the order of
// equal ones: a peer order that prefers standing and leaves strangers
// where they were.
func Order(r Reader, dids []string) {
	if r == nil {
		return
	}
	s := make(map[string]float64, len(dids))
	for _, d := range dids {
		s[d] = r.Of(d)
	}
	sort.SliceStable(dids, func(i, j int) bool { return s[dids[i]] > s[dids[j]] })
}
