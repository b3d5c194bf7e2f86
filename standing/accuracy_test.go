package standing

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestWalksMatchExact: the walk estimate of the personalised measure
// (each walk's distinct visits, walls absorbing, no bottleneck decay)
// against the exact hitting probabilities by power iteration on a
// power-law graph with walls: top-50 overlap at least 0.95 and L1
// distance of the normalised vectors at most 0.02.
func TestWalksMatchExact(t *testing.T) {
	const n, alpha, R = 400, 0.85, 200_000
	g, _ := powerLaw(n, 5, 7)
	wall := make([]bool, n)
	for _, v := range []int32{3, 50, 120} {
		wall[v] = true
	}
	seed := int32(200)
	exact := hitting(g, seed, alpha, wall)
	w := newWalks(g, seed, alpha, 256, wall, 1)
	w.generate(R, 11)
	est := w.raw()
	ov, d := overlap(est, exact, 50), l1(normalised(est), normalised(exact))
	t.Logf("walks %d over %d nodes: top-50 overlap %.3f, L1 %.4f", R, n, ov, d)
	if ov < 0.95 || d > 0.02 {
		t.Fatalf("walk estimate vs exact: top-50 overlap %.3f (want >= 0.95), L1 %.4f (want <= 0.02)", ov, d)
	}
}

// zstats compares walk visit counts with exact probabilities: per node
// z = (c - R p) / sqrt(R p (1-p)), over nodes with R p >= 5 (where the
// binomial count is close to normal). It returns the largest |z| and the
// mean z².
func zstats(w *walks, exact []float64) (maxZ, meanZ2 float64, k int) {
	R := float64(len(w.paths))
	for v, p := range exact {
		if R*p < 5 || p >= 1 {
			continue
		}
		z := (float64(w.visits[v]) - R*p) / math.Sqrt(R*p*(1-p))
		maxZ = max(maxZ, math.Abs(z))
		meanZ2 += z * z
		k++
	}
	return maxZ, meanZ2 / float64(k), k
}

// TestRepairMatchesFresh: walks drawn on a graph and then repaired
// through a stream of receipts (weights growing on existing edges, new
// edges, new nodes that were dead ends, a new wall) are distributed as
// fresh walks on the final graph. The bound: against the exact hitting
// probabilities of the final graph, every node's count is within 5
// standard deviations (|z| <= 5: for a few hundred nodes a false alarm
// has probability about 1e-4) and the mean z² is within [0.7, 1.3] (its
// sd is about 0.08 for that many nodes if the walks are right). Fresh
// walks must pass; the negative control, the same walks left unrepaired,
// must fail.
func TestRepairMatchesFresh(t *testing.T) {
	const n, alpha, R = 300, 0.85, 50_000
	g, _ := powerLaw(n, 4, 3)
	g.grow(n + 20)
	seed := int32(150)
	wall := make([]bool, n+20)
	repaired := newWalks(g, seed, alpha, 256, wall, 1)
	repaired.generate(R, 21)
	stale := newWalks(g, seed, alpha, 256, wall, 1)
	stale.generate(R, 22)

	r := rand.New(rand.NewPCG(9, 9))
	for i := range 600 {
		u, v := r.Int32N(n+20), r.Int32N(n+20)
		switch {
		case i%50 == 0:
			u = seed // the seed's own service: every walk may move
		case i%7 == 0:
			v = n + r.Int32N(20) // toward nodes that had no edges
		}
		if u == v {
			continue
		}
		w := math.Exp(r.NormFloat64()) * 3
		total := g.add(u, v, w)
		repaired.edgeAdded(u, v, w, total)
	}
	wall[77] = true
	repaired.walled(77)

	exact := hitting(g, seed, alpha, wall)
	fresh := newWalks(g, seed, alpha, 256, wall, 1)
	fresh.generate(R, 23)
	check := func(name string, w *walks) bool {
		maxZ, mz2, k := zstats(w, exact)
		ok := maxZ <= 5 && mz2 >= 0.7 && mz2 <= 1.3
		t.Logf("%-10s over %d nodes: max |z| %.2f, mean z² %.3f, within bounds: %v", name, k, maxZ, mz2, ok)
		return ok
	}
	if !check("fresh", fresh) {
		t.Fatal("fresh walks are outside the bounds: the oracle or the bound is wrong")
	}
	if !check("repaired", repaired) {
		t.Fatal("repaired walks are not distributed as fresh ones")
	}
	if check("unrepaired", stale) {
		t.Fatal("negative control: walks left unrepaired pass the bound, so it cannot tell")
	}
}
