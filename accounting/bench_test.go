package accounting

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"fleetmesh.org/fleetmesh/didcomm/transport"
)

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWindowClose is the cost of accounting for one node with 10,
// 100 and 1,000 counterparties on an in-memory mesh: per window, every
// pair exchanges its figures and both sign a receipt. It reports the
// DIDComm bytes on the wire (both directions, packed) and the CPU (of the
// whole process, so of both sides of every pair) per pair per window.
// 1,000 runs only with FLEETMESH_BENCH_FULL=1.
func BenchmarkWindowClose(b *testing.B) {
	sizes := []int{10, 100}
	if os.Getenv("FLEETMESH_BENCH_FULL") != "" {
		sizes = append(sizes, 1000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("counterparties=%d", n), func(b *testing.B) {
			nodes := newNodes(b, n+1, testConfig(), func(mn mocknet.Mocknet) error {
				ps := mn.Peers()
				for _, p := range ps[1:] {
					if _, err := mn.ConnectPeers(ps[0], p); err != nil {
						return err
					}
				}
				return nil
			})
			var wire atomic.Int64
			for _, nd := range nodes {
				ag := nd.ag
				transport.ServeLibp2p(context.Background(), nd.h, func(ctx context.Context, packed []byte) ([]byte, error) {
					out, err := ag.Handle(ctx, packed)
					wire.Add(int64(len(packed) + len(out)))
					return out, err
				})
			}
			hub := nodes[0]
			b.ResetTimer()
			cpu := cpuTime(b)
			for i := 0; i < b.N; i++ {
				for _, nd := range nodes[1:] {
					traffic(hub, nd, 100, 300)
					traffic(nd, hub, 10, 300)
				}
				closeWindow(nodes, t0.Add(time.Duration(i+1)*window+time.Millisecond))
			}
			b.StopTimer()
			rs, _ := hub.s.Receipts(hub.key.DID())
			if len(rs) != b.N*n {
				b.Fatalf("%d receipts after %d windows of %d pairs", len(rs), b.N, n)
			}
			pairs := float64(b.N * n)
			b.ReportMetric(float64(wire.Load())/pairs, "wire-bytes/pair")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/pairs, "cpu-µs/pair")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/pairs, "wall-µs/pair")
		})
	}
}
