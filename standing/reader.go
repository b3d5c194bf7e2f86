package standing

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
