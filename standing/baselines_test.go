package standing

import (
	gg "gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/iterator"
	"gonum.org/v1/gonum/graph/network"
	"gonum.org/v1/gonum/graph/simple"
)

// gonumView shows the service graph to gonum as a weighted directed
// graph, without copying it into gonum's map-based graphs (which take
// seconds to build at 400,000 edges).
type gonumView struct {
	g *graph
	// PageRank asks the weights of u's edges in From(u)'s order: the
	// cursor answers those in O(1).
	cu int64
	ci int
}

func (v *gonumView) Node(id int64) gg.Node {
	if id < 0 || id >= int64(len(v.g.out)) {
		return nil
	}
	return simple.Node(id)
}

func (v *gonumView) Nodes() gg.Nodes {
	ns := make([]gg.Node, len(v.g.out))
	for i := range ns {
		ns[i] = simple.Node(i)
	}
	return iterator.NewOrderedNodes(ns)
}

func (v *gonumView) From(id int64) gg.Nodes {
	es := v.g.out[id]
	ns := make([]gg.Node, len(es))
	for i, e := range es {
		ns[i] = simple.Node(e.to)
	}
	return iterator.NewOrderedNodes(ns)
}

func (v *gonumView) weight(u, x int64) (float64, bool) {
	es := v.g.out[u]
	if u != v.cu || v.ci >= len(es) || int64(es[v.ci].to) != x {
		v.cu, v.ci = u, 0
		if len(es) == 0 || int64(es[0].to) != x {
			v.ci = len(es)
			for i, e := range es {
				if int64(e.to) == x {
					v.ci = i
				}
			}
			if v.ci == len(es) {
				return 0, false
			}
		}
	}
	w := es[v.ci].w
	v.ci++
	return w, true
}

func (v *gonumView) HasEdgeBetween(x, y int64) bool {
	return v.HasEdgeFromTo(x, y) || v.HasEdgeFromTo(y, x)
}
func (v *gonumView) HasEdgeFromTo(u, x int64) bool { _, ok := v.weight(u, x); return ok }
func (v *gonumView) Edge(u, x int64) gg.Edge       { return v.WeightedEdge(u, x) }
func (v *gonumView) WeightedEdge(u, x int64) gg.WeightedEdge {
	w, ok := v.weight(u, x)
	if !ok {
		return nil
	}
	return simple.WeightedEdge{F: simple.Node(u), T: simple.Node(x), W: w}
}

func (v *gonumView) Weight(u, x int64) (float64, bool) {
	if u == x {
		return 0, true
	}
	return v.weight(u, x)
}

// To is not used by PageRank; a full scan answers it.
func (v *gonumView) To(id int64) gg.Nodes {
	var ns []gg.Node
	for u, es := range v.g.out {
		for _, e := range es {
			if int64(e.to) == id {
				ns = append(ns, simple.Node(u))
			}
		}
	}
	return iterator.NewOrderedNodes(ns)
}

// globalPageRank is gonum's weighted global PageRank (damping alpha).
func globalPageRank(g *graph, alpha float64) []float64 {
	m := network.PageRankSparse(&gonumView{g: g, cu: -1}, alpha, 1e-6)
	out := make([]float64, len(g.out))
	for id, r := range m {
		out[id] = r
	}
	return out
}

// pprVisits is plain personalised PageRank estimated from the same walks:
// every visit counts (a walk looping through a node counts each time),
// no bottleneck cap; the sim's graphs have no walls.
func pprVisits(w *walks) []float64 {
	out := make([]float64, len(w.visits))
	R := float64(len(w.paths))
	for _, p := range w.paths {
		for _, v := range p {
			if v != w.seed {
				out[v] += 1 / R
			}
		}
	}
	return out
}

// followCount is the web-of-trust relays' rule: the observer's trusted
// peers are the nodes it follows (here: those that served it); a node is
// admitted when it is one of them or at least n of them vouch for it
// (have an edge to it). It returns 1 for admitted nodes, 0 else.
func followCount(g *graph, o int32, n int) []float64 {
	out := make([]float64, len(g.out))
	vouches := make([]int, len(g.out))
	for _, f := range g.out[o] {
		out[f.to] = 1
		for _, e := range g.out[f.to] {
			vouches[e.to]++
		}
	}
	for v, c := range vouches {
		if c >= n {
			out[v] = 1
		}
	}
	out[o] = 0
	return out
}
