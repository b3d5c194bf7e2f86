package standing

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

var fullSim = flag.Bool("standing.full", false, "Sybil simulation with 100,000 walks from each of 5 observers (default: 20,000 from 3)")

// cloneFor copies g so that the edges of the nodes in mutate (and any
// node added) can change without touching g.
func cloneFor(g *graph, mutate ...int32) *graph {
	c := &graph{out: append([][]edge(nil), g.out...), total: append([]float64(nil), g.total...),
		cum: append([][]float64(nil), g.cum...), dirty: append([]bool(nil), g.dirty...)}
	for _, u := range mutate {
		c.out[u] = append([]edge(nil), g.out[u]...)
		c.cum[u], c.dirty[u] = nil, true
	}
	return c
}

// kendall is Kendall's tau-b of x and y over the indices in idx.
func kendall(x, y []float64, idx []int) float64 {
	var c, d, tx, ty float64
	for i := range idx {
		for j := i + 1; j < len(idx); j++ {
			a, b := idx[i], idx[j]
			sx, sy := sign(x[a]-x[b]), sign(y[a]-y[b])
			switch {
			case sx == 0 && sy == 0:
			case sx == 0:
				tx++
			case sy == 0:
				ty++
			case sx == sy:
				c++
			default:
				d++
			}
		}
	}
	return (c - d) / math.Sqrt((c+d+tx)*(c+d+ty))
}

func sign(x float64) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// coalition sums x over the attacker and its Sybils.
func coalition(x []float64, a int32, s []int32) float64 {
	t := x[a]
	for _, v := range s {
		t += x[v]
	}
	return t
}

// TestSybilSimulation: on a power-law service graph of 10,000 honest
// nodes and over 200,000 co-signed pairs, one attacker with one real
// counterparty adds k = 1, 10, 100, 1,000 Sybils in MeritRank's three
// shapes, Sybils co-signing freely. Seen from honest observers (the
// attacker's counterparty, and nodes picked at random):
//   - gain, the coalition's total standing over the attacker's standing
//     with no attack, minus one, summed over observers, is at most 0.10 at
//     every k, and the ratio (gain + 1) at k = 1,000 is at most 1.1x its
//     value at k = 1;
//   - honest nodes' ranking keeps Kendall tau-b >= 0.9 against no attack
//     (over up to 1,000 honest nodes with standing, per observer), and at
//     most 5% of honest nodes lose more than 10% of their standing (of
//     those at least 100 walks visit with no attack: below that one
//     walk more or less is itself 1% or more, and a node visited by 5
//     walks that loses one "loses 20%").
//
// In the same run and table: plain personalised PageRank from the same
// walks (every visit counts, no cap), gonum's global PageRank, and the
// follow-count rule at 1 and 3 vouches. The attack must be real: plain
// personalised PageRank must give it a gain above 0.10.
func TestSybilSimulation(t *testing.T) {
	const n, m, alpha, beta = 10_000, 21, 0.85, 0.05
	// measured is how many walks must visit an honest node for a loss of
	// 10% of its standing to be told from the walks' own granularity.
	const measured = 100
	walksN, observers := 20_000, 3
	if *fullSim {
		walksN, observers = 100_000, 5
	}
	base, pairs := powerLaw(n, m, 42)
	if len(pairs) < 200_000 {
		t.Fatalf("%d pairs, want at least 200,000", len(pairs))
	}
	r := rand.New(rand.NewPCG(42, 2))
	h := int32(n/2 + r.IntN(n/4)) // the attacker's one real counterparty
	obs := []int32{h}
	for len(obs) < observers {
		if o := r.Int32N(n); o != h {
			obs = append(obs, o)
		}
	}
	// No attack: the attacker a is an ordinary node with one counterparty.
	a := int32(n)
	noAttack := cloneFor(base, h)
	noAttack.grow(n + 1)
	noAttack.add(h, a, 1)
	noAttack.add(a, h, 1)

	type run struct{ ours, raw, ppr []float64 }
	walkFrom := func(g *graph, o int32) run {
		w := newWalks(g, o, alpha, 256, nil, 1)
		w.generate(walksN, 1000+uint64(o))
		return run{w.scores(beta, nil), w.raw(), pprVisits(w)}
	}
	before := make([]run, len(obs))
	for i, o := range obs {
		before[i] = walkFrom(noAttack, o)
	}
	prBefore := globalPageRank(noAttack, alpha)
	f1Before, f3Before := followCount(noAttack, h, 1), followCount(noAttack, h, 3)
	honestAdmitted := func(x []float64) float64 {
		s := 0.0
		for _, v := range x[:n] {
			s += v
		}
		return s / n
	}
	t.Logf("%d nodes, %d pairs (%d edges), %d walks from each of %d observers (the attacker's counterparty first)",
		n, len(pairs), 2*len(pairs), walksN, len(obs))
	t.Logf("follow-count rule at the attacker's counterparty admits %.1f%% of honest nodes at 1 vouch, %.1f%% at 3",
		100*honestAdmitted(f1Before), 100*honestAdmitted(f3Before))
	var table strings.Builder
	fmt.Fprintf(&table, "| shape | k | ours: gain | ours: τ (min) | ours: honest losing >10%% (max) | plain PPR: gain | global PageRank: gain | follow ≥1: Sybils admitted | follow ≥3: Sybils admitted |\n|---|---|---|---|---|---|---|---|---|\n")
	failed := false
	for _, shape := range []string{"path", "cycle", "parallel"} {
		var ratio1 float64
		for _, k := range []int{1, 10, 100, 1000} {
			g := cloneFor(noAttack, a)
			syb := withSybils(g, a, shape, k)
			var oursC, oursA, pprC, pprA float64
			minTau, maxLoss := 1.0, 0.0
			for i, o := range obs {
				after := walkFrom(g, o)
				oursC += coalition(after.ours, a, syb)
				oursA += before[i].ours[a]
				pprC += coalition(after.ppr, a, syb)
				pprA += before[i].ppr[a]
				var idx []int
				lost, with := 0, 0
				for v := range n {
					if before[i].ours[v] > 0 && int32(v) != o {
						idx = append(idx, v)
					}
					if before[i].raw[v]*float64(walksN) >= measured && int32(v) != o {
						with++
						if after.ours[v] < 0.9*before[i].ours[v] {
							lost++
						}
					}
				}
				if step := len(idx) / 1000; step > 1 {
					sub := idx[:0]
					for j := 0; j < len(idx); j += step {
						sub = append(sub, idx[j])
					}
					idx = sub
				}
				minTau = min(minTau, kendall(before[i].ours, after.ours, idx))
				maxLoss = max(maxLoss, float64(lost)/float64(with))
			}
			gain := oursC/oursA - 1
			if k == 1 {
				ratio1 = gain + 1
			}
			pr := globalPageRank(g, alpha)
			prGain := coalition(pr, a, syb)/prBefore[a] - 1
			f1, f3 := followCount(g, h, 1), followCount(g, h, 3)
			fmt.Fprintf(&table, "| %s | %d | %.4f | %.4f | %.2f%% | %.2f | %.2f | %d/%d | %d/%d |\n", shape, k, gain, minTau, 100*maxLoss,
				pprC/pprA-1, prGain, int(coalition(f1, a, syb)-f1[a]), k, int(coalition(f3, a, syb)-f3[a]), k)
			bad := func(format string, args ...any) {
				failed = true
				t.Errorf("%s k=%d: "+format, append([]any{shape, k}, args...)...)
			}
			if gain > 0.10 {
				bad("gain %.4f > 0.10", gain)
			}
			if k == 1000 && (gain+1) > 1.1*ratio1 {
				bad("coalition/attacker %.4f at k=1000 > 1.1 x %.4f at k=1", gain+1, ratio1)
			}
			if minTau < 0.9 {
				bad("Kendall tau %.4f < 0.9", minTau)
			}
			if maxLoss > 0.05 {
				bad("%.2f%% of honest nodes lose more than 10%%", 100*maxLoss)
			}
			if k >= 10 && pprC/pprA-1 <= 0.10 {
				bad("plain personalised PageRank gains only %.4f: the attack is not real", pprC/pprA-1)
			}
		}
	}
	t.Logf("\n%s", table.String())
	if failed {
		t.Log("failed")
	}
}
