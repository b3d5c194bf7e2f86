package standing

import "math/rand/v2"

// walks is the walk store: every walk starting at seed, kept between
// recomputations, with an index from each node to the walks that pass it
// so a change at one node repairs only those (Bahmani, Chowdhury, Goel,
// "Fast incremental and personalized PageRank", VLDB 2010).
//
// A walk is the nodes it visited after the seed, in order. At each node it
// continues with probability alpha; if it continues it steps along an
// out-edge picked by weight. It ends early at a node with no out-edge (a
// dead end, remembered so an edge added there later extends it) and
// before a wall: the step into a wall is taken and absorbed, the wall is
// not recorded and gets no credit.
type walks struct {
	g        *graph
	seed     int32
	alpha    float64
	maxSteps int
	wall     []bool

	paths   [][]int32
	deadEnd []bool
	// index[u] lists walks that passed u; a walk rerouted since may no
	// longer do so, and a walk may be listed twice: users check the path.
	index [][]int32
	// visits[v] counts the walks that visit v at least once.
	visits []int32
	stamp  []uint32 // per node, for deduplicating a walk's nodes
	gen    uint32
	// walkGen is per walk, for deduplicating the walks of one repair.
	walkGen []uint32
	wgen    uint32
	rng     *rand.Rand
}

func newWalks(g *graph, seed int32, alpha float64, maxSteps int, wall []bool, rngSeed uint64) *walks {
	return &walks{g: g, seed: seed, alpha: alpha, maxSteps: maxSteps, wall: wall,
		rng: rand.New(rand.NewPCG(rngSeed, 0x5eed))}
}

func (s *walks) grow(n int) {
	for len(s.index) < n {
		s.index = append(s.index, nil)
		s.visits = append(s.visits, 0)
		s.stamp = append(s.stamp, 0)
	}
}

func (s *walks) isWall(v int32) bool { return int(v) < len(s.wall) && s.wall[v] }

// extend continues path from its last node (the seed if empty) as if the
// walk had just decided to continue there (cont) or not yet decided.
func (s *walks) extend(path []int32, cont bool, r *rand.Rand) ([]int32, bool) {
	cur := s.seed
	if len(path) > 0 {
		cur = path[len(path)-1]
	}
	for len(path) < s.maxSteps {
		if !cont && r.Float64() >= s.alpha {
			return path, false
		}
		cont = false
		nxt := s.g.next(cur, r.Float64())
		if nxt < 0 {
			return path, true
		}
		if s.isWall(nxt) {
			return path, false
		}
		path = append(path, nxt)
		cur = nxt
	}
	return path, false
}

// generate draws n fresh walks, each from its own stream of the seeded
// generator, so that two stores over graphs that differ only in one
// region draw the same walks everywhere else.
func (s *walks) generate(n int, rngSeed uint64) {
	s.paths = make([][]int32, n)
	s.deadEnd = make([]bool, n)
	s.index = make([][]int32, len(s.g.out))
	s.visits = make([]int32, len(s.g.out))
	s.stamp = make([]uint32, len(s.g.out))
	s.gen = 0
	var pcg rand.PCG
	r := rand.New(&pcg)
	for i := range n {
		pcg.Seed(rngSeed, uint64(i))
		s.paths[i], s.deadEnd[i] = s.extend(nil, false, r)
		s.count(int32(i), 1, 0)
	}
}

// count adds sign to the visits of walk i's distinct nodes from position
// from on, also indexing them when adding.
func (s *walks) count(i int32, sign int32, from int) {
	s.gen++
	p := s.paths[i]
	for _, v := range p[:from] {
		s.stamp[v] = s.gen
	}
	for _, v := range p[from:] {
		if s.stamp[v] == s.gen {
			continue
		}
		s.stamp[v] = s.gen
		if v == s.seed {
			continue
		}
		s.visits[v] += sign
		if sign > 0 {
			s.index[v] = append(s.index[v], i)
		}
	}
}

// recount replaces walk i's path from position from on with tail and
// keeps visits and index in step.
func (s *walks) replace(i int32, from int, tail []int32, dead bool) {
	s.count(i, -1, from)
	s.paths[i] = append(s.paths[i][:from], tail...)
	s.deadEnd[i] = dead
	s.count(i, 1, from)
}

// edgeAdded repairs the walks after the edge u→v gained delta, u's
// out-weight now being total: each continued step out of u switches to v
// with probability delta/total (the new step distribution is the old one
// mixed with v in that proportion), and a walk that dead-ended at u goes
// on. It returns how many walks it changed.
func (s *walks) edgeAdded(u, v int32, delta, total float64) int {
	s.grow(len(s.g.out))
	p := delta / total
	changed := 0
	if u == s.seed {
		// Every walk leaves the seed: no index, no duplicates.
		for i := range s.paths {
			if s.repairAt(int32(i), u, v, p) {
				changed++
			}
		}
		return changed
	}
	// A walk listed twice in the index is repaired once: walkGen marks
	// the walks done in this call.
	if len(s.walkGen) != len(s.paths) {
		s.walkGen = make([]uint32, len(s.paths))
	}
	s.wgen++
	for _, i := range s.index[u] {
		if s.walkGen[i] == s.wgen {
			continue
		}
		s.walkGen[i] = s.wgen
		if s.repairAt(i, u, v, p) {
			changed++
		}
	}
	return changed
}

// repairAt applies edgeAdded's rule to walk i.
func (s *walks) repairAt(i, u, v int32, p float64) bool {
	path := s.paths[i]
	// Position j is the walk's node j-1 (the seed when j == 0); a step
	// out of it was taken when j < len(path).
	at := func(j int) int32 {
		if j == 0 {
			return s.seed
		}
		return path[j-1]
	}
	for j := 0; j <= len(path); j++ {
		if at(j) != u {
			continue
		}
		if j == len(path) {
			if !s.deadEnd[i] {
				return false
			}
			tail, dead := s.extend(append([]int32(nil), path...), true, s.rng)
			s.replace(i, len(path), tail[len(path):], dead)
			return true
		}
		if s.rng.Float64() < p {
			if s.isWall(v) {
				s.replace(i, j, nil, false)
				return true
			}
			head := append(append([]int32(nil), path[:j]...), v)
			tail, dead := s.extend(head, false, s.rng)
			s.replace(i, j, tail[j:], dead)
			return true
		}
	}
	return false
}

// walled cuts every walk at its first visit of v, which has just become
// a wall, and returns how many it cut.
func (s *walks) walled(v int32) int {
	s.grow(len(s.g.out))
	cut := 0
	for _, i := range s.index[v] {
		for j, x := range s.paths[i] {
			if x == v {
				s.replace(i, j, nil, false)
				cut++
				break
			}
		}
	}
	s.index[v] = nil
	return cut
}
