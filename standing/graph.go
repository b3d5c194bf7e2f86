package standing

import "sort"

// edge is one out-edge: from a node to one that served it, weighted by
// the decayed service it received.
type edge struct {
	to int32
	w  float64
}

// graph is the service graph on dense node numbers: out[u] are the nodes
// that served u. A walk leaves u along an edge with probability its weight
// over total[u]; cum[u] is the cumulative weights, rebuilt when u's edges
// change, so a step is a binary search even at a hub.
type graph struct {
	out   [][]edge
	total []float64
	cum   [][]float64
	dirty []bool
}

// grow makes room for nodes 0..n-1.
func (g *graph) grow(n int) {
	for len(g.out) < n {
		g.out = append(g.out, nil)
		g.total = append(g.total, 0)
		g.cum = append(g.cum, nil)
		g.dirty = append(g.dirty, false)
	}
}

// add adds w to the edge u→v, making it if new, and returns u's new
// total out-weight.
func (g *graph) add(u, v int32, w float64) float64 {
	g.grow(int(max(u, v)) + 1)
	found := false
	for i := range g.out[u] {
		if g.out[u][i].to == v {
			g.out[u][i].w += w
			found = true
			break
		}
	}
	if !found {
		g.out[u] = append(g.out[u], edge{v, w})
	}
	g.total[u] += w
	g.dirty[u] = true
	return g.total[u]
}

// next picks u's successor for a uniform r in [0,1); -1 when u has no
// out-edge.
func (g *graph) next(u int32, r float64) int32 {
	if int(u) >= len(g.out) || g.total[u] <= 0 {
		return -1
	}
	es := g.out[u]
	if g.dirty[u] || len(g.cum[u]) != len(es) {
		c := g.cum[u][:0]
		s := 0.0
		for _, e := range es {
			s += e.w
			c = append(c, s)
		}
		g.cum[u], g.dirty[u] = c, false
	}
	c := g.cum[u]
	x := r * c[len(c)-1]
	i := sort.SearchFloat64s(c, x)
	for i < len(c)-1 && (c[i] <= x || es[i].w <= 0) {
		i++
	}
	return es[i].to
}

// scale multiplies every weight by f (rebasing the epoch decay).
func (g *graph) scale(f float64) {
	for u := range g.out {
		for i := range g.out[u] {
			g.out[u][i].w *= f
		}
		g.total[u] *= f
		g.dirty[u] = true
	}
}

// prune drops the edges lighter than min.
func (g *graph) prune(min float64) {
	for u := range g.out {
		kept := g.out[u][:0]
		t := 0.0
		for _, e := range g.out[u] {
			if e.w >= min {
				kept = append(kept, e)
				t += e.w
			}
		}
		g.out[u], g.total[u], g.dirty[u] = kept, t, true
	}
}
