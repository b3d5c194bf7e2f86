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

// Order sorts xs by their node's standing (did names each one's node),
// highest first, keeping the order of equal ones: candidates with
// standing come first and strangers stay where they were, so a list
// given in a random or chosen order keeps it when no one has standing. A
// nil r leaves xs as it is.
func Order[T any](r Reader, xs []T, did func(T) string) {
	if r == nil {
		return
	}
	s := make([]float64, len(xs))
	idx := make([]int, len(xs))
	for i, x := range xs {
		s[i], idx[i] = r.Of(did(x)), i
	}
	sort.SliceStable(idx, func(i, j int) bool { return s[idx[i]] > s[idx[j]] })
	sorted := make([]T, len(xs))
	for i, k := range idx {
		sorted[i] = xs[k]
	}
	copy(xs, sorted)
}
