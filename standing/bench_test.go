package standing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far. The
// benchmarks report it per operation beside the wall time: on a machine
// shared with other work the wall time measures the sharing.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU time per op since start, in ms and µs.
func reportCPU(b *testing.B, start time.Duration) {
	d := cpuTime() - start
	b.ReportMetric(float64(d.Microseconds())/float64(b.N), "cpu-µs/op")
}

// monthGraph is a service graph of n nodes (power law, m counterparties
// each when joining) with a month of hourly receipts per pair, folded
// into each edge as View does: each hour's bytes times epoch_decay to
// the power of its age in days. (Ingesting 720 signed receipts per pair
// would measure ed25519, not the walks: TestViewEvidence covers that
// path.)
func monthGraph(n, m int) *graph {
	_, pairs := powerLaw(n, m, 5)
	r := rand.New(rand.NewPCG(5, 5))
	g := &graph{}
	g.grow(n)
	for _, p := range pairs {
		for _, d := range [][2]int32{{p[0], p[1]}, {p[1], p[0]}} {
			rate := math.Exp(r.NormFloat64()) * 1e6 // bytes an hour
			w := 0.0
			for day := range 30 {
				w += 24 * rate * math.Pow(0.9, float64(29-day))
			}
			g.add(d[0], d[1], w)
		}
	}
	return g
}

func heapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// BenchmarkView: one node's full recomputation (10,000 walks drawn and
// scored) over 1,000, 10,000 and 100,000 nodes; MB is the heap the
// graph and the walks hold.
func BenchmarkView(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			before := heapMB()
			g := monthGraph(n, 10)
			w := newWalks(g, 0, 0.85, 256, nil, 1)
			w.generate(10_000, 1)
			w.scores(0.05, nil)
			mb := heapMB() - before
			b.ResetTimer()
			start := cpuTime()
			for i := range b.N {
				w.generate(10_000, uint64(i))
				w.scores(0.05, nil)
			}
			reportCPU(b, start)
			b.ReportMetric(mb, "MB")
		})
	}
}

// BenchmarkPowerIteration is the peer of BenchmarkView at 10,000 nodes:
// plain personalised PageRank by power iteration to 1e-6 (what a
// recomputation costs without walks; it has no unique visits, no cap).
func BenchmarkPowerIteration(b *testing.B) {
	g := monthGraph(10_000, 10)
	n := len(g.out)
	x, nx := make([]float64, n), make([]float64, n)
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for range b.N {
		clear(x)
		x[0] = 1
		for {
			clear(nx)
			nx[0] = 1 - 0.85
			for u := range n {
				if x[u] == 0 || g.total[u] == 0 {
					continue
				}
				f := 0.85 * x[u] / g.total[u]
				for _, e := range g.out[u] {
					nx[e.to] += f * e.w
				}
			}
			d := l1(x, nx)
			x, nx = nx, x
			if d < 1e-6 {
				break
			}
		}
	}
}

// BenchmarkIncremental: one receipt's incremental update (an edge's
// service grows by an hour's worth and the walks through it are
// repaired) over 10,000 nodes with 10,000 walks, amortised over updates
// at random pairs (own=false) and at the node's own pairs (own=true);
// its peer is BenchmarkView/nodes=10000. Rescoring, done when standing
// is next read, is not in it: it is the scores part of BenchmarkView.
func BenchmarkIncremental(b *testing.B) {
	for _, own := range []bool{false, true} {
		b.Run(fmt.Sprintf("own=%v", own), func(b *testing.B) { benchIncremental(b, own) })
	}
}

// benchIncremental updates random pairs, or (own) the node's own pairs,
// whose repair scans every walk.
func benchIncremental(b *testing.B, own bool) {
	g := monthGraph(10_000, 10)
	w := newWalks(g, 0, 0.85, 256, nil, 1)
	w.generate(10_000, 1)
	r := rand.New(rand.NewPCG(8, 8))
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for range b.N {
		u := r.Int32N(int32(len(g.out)))
		if own {
			u = 0
		}
		es := g.out[u]
		if len(es) == 0 {
			continue
		}
		v := es[r.IntN(len(es))].to
		d := math.Exp(r.NormFloat64()) * 1e6
		total := g.add(u, v, d)
		w.edgeAdded(u, v, d, total)
	}
}
