package standing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Simulation is a service graph given by its edges rather than built
// from receipts, and the standing each of its nodes gives the others:
// for simulations of what reads standing (package label's Sybil
// labellers, label/sim_test.go) on the graph this package's own Sybil
// simulation uses (TestSybilSimulation). A running node never uses it:
// its View takes only verified receipts.
type Simulation struct {
	g *graph
}

// PowerLawSimulation is the power-law service graph of n honest nodes,
// numbered 0 to n-1, each new node making m counterparties
// (TestSybilSimulation's is n = 10,000, m = 21, seed 42).
func PowerLawSimulation(n, m int, seed uint64) *Simulation {
	g, _ := powerLaw(n, m, seed)
	return &Simulation{g: g}
}

// Len is the number of nodes.
func (s *Simulation) Len() int { return len(s.g.out) }

// Attach adds a node that served node to and was served by it, one unit
// each way, and returns it: an attacker with one real counterparty, as
// TestSybilSimulation's.
func (s *Simulation) Attach(to int32) int32 {
	a := int32(len(s.g.out))
	s.g.grow(int(a) + 1)
	s.g.add(to, a, 1)
	s.g.add(a, to, 1)
	return a
}

// AddSybils adds k Sybils to the attacker a in one of MeritRank's
// shapes, "path", "cycle" or "parallel", co-signing far more service
// than honest nodes do, and returns them.
func (s *Simulation) AddSybils(a int32, shape string, k int) ([]int32, error) {
	switch shape {
	case "path", "cycle", "parallel":
	default:
		return nil, fmt.Errorf("standing: shape %q: want path, cycle or parallel", shape)
	}
	return withSybils(s.g, a, shape, k), nil
}

// Standing is every node's standing from observer's point of view with
// cfg's alpha, beta, walks and max_steps, walks drawn from rngSeed.
func (s *Simulation) Standing(observer int32, cfg Config, rngSeed uint64) []float64 {
	w := newWalks(s.g, observer, cfg.Alpha, cfg.MaxSteps, nil, rngSeed)
	w.generate(cfg.Walks, rngSeed)
	return w.scores(cfg.Beta, nil)
}

// powerLaw builds a service graph of n nodes by preferential attachment
// (Barabási–Albert): each new node makes m counterparties picked in
// proportion to their degree, so degrees follow a power law. Each pair
// served each other: two edges, with heavy-tailed weights (log-normal).
// It returns the pairs too.
func powerLaw(n, m int, seed uint64) (*graph, [][2]int32) {
	r := rand.New(rand.NewPCG(seed, 1))
	g := &graph{}
	g.grow(n)
	var ends []int32 // every pair's two ends: picking from it is by degree
	var pairs [][2]int32
	for v := int32(0); v < int32(n); v++ {
		picked := map[int32]bool{}
		for len(picked) < min(m, int(v)) {
			var u int32
			if len(ends) == 0 || r.IntN(10) == 0 {
				u = r.Int32N(v) // a tenth uniform, so young nodes get picked too
			} else {
				u = ends[r.IntN(len(ends))]
			}
			if u != v {
				picked[u] = true
			}
		}
		us := make([]int32, 0, len(picked))
		for u := range picked {
			us = append(us, u)
		}
		slices.Sort(us)
		for _, u := range us {
			g.add(v, u, math.Exp(r.NormFloat64()))
			g.add(u, v, math.Exp(r.NormFloat64()))
			ends = append(ends, u, v)
			pairs = append(pairs, [2]int32{u, v})
		}
	}
	return g, pairs
}

// sybilWeight is what a Sybil receipt records: the attacker co-signs
// whatever it likes, so far more than honest service (median 1).
const sybilWeight = 1000

// withSybils adds k Sybils to the attacker a in the given shape:
// path a–s1–…–sk (both ways), cycle a→s1→…→sk→a, parallel a–si (both
// ways). It returns the Sybils.
func withSybils(g *graph, a int32, shape string, k int) []int32 {
	first := int32(len(g.out))
	g.grow(len(g.out) + k)
	s := make([]int32, k)
	for i := range s {
		s[i] = first + int32(i)
	}
	both := func(x, y int32) { g.add(x, y, sybilWeight); g.add(y, x, sybilWeight) }
	switch shape {
	case "path":
		prev := a
		for _, x := range s {
			both(prev, x)
			prev = x
		}
	case "cycle":
		prev := a
		for _, x := range s {
			g.add(prev, x, sybilWeight)
			prev = x
		}
		g.add(prev, a, sybilWeight)
	case "parallel":
		for _, x := range s {
			both(a, x)
		}
	}
	return s
}
