package standing

import (
	"math"
	"sort"
)

// hitting is the exact oracle: for every node v, the probability that a
// walk from seed (continuing with probability alpha, stepping by weight,
// absorbed by walls, unbounded in length) visits v, by power iteration (Gauss-Seidel) of
// h_v(x) = alpha * sum_y p(x,y) [y == v ? 1 : wall(y) ? 0 : h_v(y)].
func hitting(g *graph, seed int32, alpha float64, wall []bool) []float64 {
	n := len(g.out)
	out := make([]float64, n)
	h := make([]float64, n)
	for v := range int32(n) {
		if v == seed || (int(v) < len(wall) && wall[v]) {
			continue
		}
		clear(h)
		for range 400 {
			diff := 0.0
			for x := range n {
				if int32(x) == v || g.total[x] == 0 {
					continue
				}
				s := 0.0
				for _, e := range g.out[x] {
					switch {
					case e.to == v:
						s += e.w
					case int(e.to) < len(wall) && wall[e.to]:
					default:
						s += e.w * h[e.to]
					}
				}
				nx := alpha * s / g.total[x]
				diff = max(diff, math.Abs(nx-h[x]))
				h[x] = nx // Gauss-Seidel: in place, converging to the same fixed point
			}
			if diff < 1e-11 {
				break
			}
		}
		out[v] = h[seed]
	}
	return out
}

// normalised returns x scaled to sum 1.
func normalised(x []float64) []float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	out := make([]float64, len(x))
	if s == 0 {
		return out
	}
	for i, v := range x {
		out[i] = v / s
	}
	return out
}

// l1 is the L1 distance of a and b.
func l1(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d += math.Abs(a[i] - b[i])
	}
	return d
}

// top returns the indices of the k largest of x.
func top(x []float64, k int) []int {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return x[idx[i]] > x[idx[j]] })
	return idx[:min(k, len(idx))]
}

// overlap is the share of a's top k also in b's top k.
func overlap(a, b []float64, k int) float64 {
	in := map[int]bool{}
	for _, i := range top(b, k) {
		in[i] = true
	}
	n := 0
	for _, i := range top(a, k) {
		if in[i] {
			n++
		}
	}
	return float64(n) / float64(k)
}
