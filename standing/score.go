package standing

import (
	"sort"
)

// scores turns the walks into standing (spec/standing.md "Score"). A
// node's raw standing is the share of walks that visit it, each walk
// counting it once however often it loops through it. Its bottleneck u
// is the other node (neither the seed nor it) that the largest share b of
// the walks reaching it passed first; ties go to the node fewer walks
// visit, the narrower one. The part b of its raw standing that came
// through u is pooled with that of every other node whose bottleneck is
// u, and the pool is capped at beta times u's own standing: whatever
// hangs off one node (a Sybil region off its attacker, a phone off its
// home) can take through it at most beta of that node's standing, however
// many identities it has. The rest, (1 - b) of the raw standing, came
// through many nodes and is kept. Nodes are settled in the order walks
// first reach them (mean position), so a bottleneck is settled before
// what hangs off it. through, if not nil, receives b per node.
func (s *walks) scores(beta float64, through []float64) []float64 {
	n := len(s.visits)
	out := make([]float64, n)
	if len(s.paths) == 0 {
		return out
	}
	raw := s.raw()
	bn, share, depth := s.bottlenecks()
	order := make([]int32, 0, n)
	for v := range n {
		if raw[v] > 0 {
			order = append(order, int32(v))
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return depth[order[i]] < depth[order[j]] })
	// pool[u] is the bottleneck part of u's dependents' raw standing.
	pool := make([]float64, n)
	for _, v := range order {
		if u := bn[v]; u >= 0 {
			pool[u] += share[v] * raw[v]
		}
	}
	settled := make([]bool, n)
	for _, v := range order {
		b := share[v]
		if through != nil {
			through[v] = b
		}
		x := (1 - b) * raw[v]
		if u := bn[v]; u >= 0 && pool[u] > 0 {
			su := out[u]
			if !settled[u] {
				su = (1 - share[u]) * raw[u] // not settled yet: what it keeps for sure
			}
			x += b * raw[v] * min(1, beta*su/pool[u])
		}
		out[v], settled[v] = x, true
	}
	return out
}

// raw is each node's share of the walks that visit it (the seed and
// walls: 0).
func (s *walks) raw() []float64 {
	raw := make([]float64, len(s.visits))
	if len(s.paths) == 0 {
		return raw
	}
	R := float64(len(s.paths))
	for v, c := range s.visits {
		if c > 0 && int32(v) != s.seed && !s.isWall(int32(v)) {
			raw[v] = float64(c) / R
		}
	}
	return raw
}

// bottlenecks returns, per node v, its bottleneck (-1: none), the share
// of the walks visiting v that passed it first, and v's mean first-visit
// position. For each v it counts, over the walks visiting v, the nodes
// each passed before first reaching v, in a dense counter: the work is
// the sum over walks of their length squared, with no hashing.
func (s *walks) bottlenecks() (bn []int32, share, depth []float64) {
	n := len(s.visits)
	type ref struct{ walk, pos int32 }
	off := make([]int32, n+1)
	for _, p := range s.paths {
		s.gen++
		for _, v := range p {
			if v != s.seed && s.stamp[v] != s.gen {
				s.stamp[v] = s.gen
				off[v+1]++
			}
		}
	}
	for v := range n {
		off[v+1] += off[v]
	}
	refs := make([]ref, off[n])
	fill := append([]int32(nil), off[:n]...)
	depth = make([]float64, n)
	for i, p := range s.paths {
		s.gen++
		for j, v := range p {
			if v != s.seed && s.stamp[v] != s.gen {
				s.stamp[v] = s.gen
				refs[fill[v]] = ref{int32(i), int32(j)}
				fill[v]++
				depth[v] += float64(j)
			}
		}
	}
	bn = make([]int32, n)
	share = make([]float64, n)
	cnt := make([]int32, n)
	var touched []int32
	for v := range n {
		bn[v] = -1
		rs := refs[off[v]:off[v+1]]
		if len(rs) == 0 {
			continue
		}
		touched = touched[:0]
		for _, r := range rs {
			s.gen++
			for _, u := range s.paths[r.walk][:r.pos] {
				if u == s.seed || s.stamp[u] == s.gen {
					continue
				}
				s.stamp[u] = s.gen
				if cnt[u] == 0 {
					touched = append(touched, u)
				}
				cnt[u]++
			}
		}
		var best int32
		for _, u := range touched {
			c := cnt[u]
			if c > best || c == best && (s.visits[u] < s.visits[bn[v]] || s.visits[u] == s.visits[bn[v]] && u > bn[v]) {
				best, bn[v] = c, u
			}
			cnt[u] = 0
		}
		share[v] = float64(best) / float64(len(rs))
		depth[v] /= float64(len(rs))
	}
	return bn, share, depth
}
