package accounting

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
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

// BenchmarkReceiptsAndReports is one window's accounting of a home with
// 10, 100, 1,000 (and with FLEETMESH_BENCH_FULL=1, 10,000) counterparties
// that propose to it as leaves do, measured at each end: every pair's
// exchange through the shared proposer (exchange.Proposer) against the
// home's real handlers and database, then the home's report of the window
// in pages and a reader's verification of every page. The proposers'
// end keeps its receipts in memory (its own storage is not counted); the
// home's end includes its bbolt writes (fsynced). Bytes are message
// bodies (JSON) before DIDComm packing, both ways, and the report pages.
func BenchmarkReceiptsAndReports(b *testing.B) {
	sizes := []int{10, 100, 1000}
	if os.Getenv("FLEETMESH_BENCH_FULL") != "" {
		sizes = append(sizes, 10_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("counterparties=%d", n), func(b *testing.B) {
			hub := newNodes(b, 1, testConfig(), nil)[0]
			hub.s.SetLeaves(func(string) bool { return true })
			ctx := context.Background()
			secs := int64(window / time.Second)
			type leafEnd struct {
				key  *identity.Key
				id   peer.ID
				head *receipt.Receipt
			}
			leaves := make([]*leafEnd, n)
			for i := range leaves {
				k, err := identity.GenerateKey()
				if err != nil {
					b.Fatal(err)
				}
				id, err := identity.PeerIDFromDID(k.DID())
				if err != nil {
					b.Fatal(err)
				}
				leaves[i] = &leafEnd{key: k, id: id}
			}
			var hubT, leafT, reportT, readT time.Duration
			var msgBytes, reportBytes, pages int64
			b.ResetTimer()
			cpu := cpuTime(b)
			for i := 0; i < b.N; i++ {
				end := t0.Add(time.Duration(i+1) * window)
				for _, l := range leaves {
					hub.s.meter.Record(l.id, meter.MediationMessages, meter.Gave, 4)
				}
				t := time.Now()
				hub.s.Round(ctx, end.Add(time.Millisecond))
				hub.s.Round(ctx, end.Add(2*time.Millisecond))
				hubT += time.Since(t)
				w := end.Add(-window).Unix()
				mine := receipt.Side{Received: receipt.Counts{MediationMessages: 4}}
				for _, l := range leaves {
					var inHub time.Duration
					send := func(ctx context.Context, typ string, body any) (*didcomm.Message, error) {
						m, err := didcomm.NewMessage(typ, body)
						if err != nil {
							return nil, err
						}
						m.From = l.key.DID()
						t := time.Now()
						out, err := hub.s.handleReceipt(ctx, &didcomm.Unpacked{Message: m, Authenticated: true})
						inHub += time.Since(t)
						msgBytes += int64(len(m.Body))
						if out != nil {
							msgBytes += int64(len(out.Body))
						}
						return out, err
					}
					p := &exchange.Proposer{Key: l.key, Responder: hub.key.DID(), Bounds: exchange.DefaultBounds, Send: send,
						Mine:  func(int64) (receipt.Side, bool) { return mine, true },
						Store: func(r *receipt.Receipt) error { l.head = r; return nil }}
					t := time.Now()
					out, err := p.Propose(ctx, l.head, exchange.Window{Start: w, Secs: secs, Mine: mine})
					if err == nil && out.Receipt == nil {
						err = fmt.Errorf("window disputed: %s", out.Dispute.Reason)
					}
					if err == nil {
						err = p.Countersign(ctx, out.Receipt)
					}
					if err != nil {
						b.Fatal(err)
					}
					leafT += time.Since(t) - inHub
					hubT += inHub
				}
				t = time.Now()
				if err := hub.s.publish(w); err != nil {
					b.Fatal(err)
				}
				reportT += time.Since(t)
				var raws [][]byte
				hub.s.db.b.View(func(tx *bolt.Tx) error {
					c := tx.Bucket(bReports).Cursor()
					pfx := key(hub.key.DID(), uint64(w))
					for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
						raws = append(raws, bytes.Clone(v))
						reportBytes += int64(len(v))
					}
					return nil
				})
				t = time.Now()
				var got []*receipt.Report
				items := 0
				for _, raw := range raws {
					rep, err := receipt.DecodeReport(raw)
					if err != nil {
						b.Fatal(err)
					}
					items += len(rep.Receipts)
					got = append(got, rep)
				}
				if err := receipt.CheckPages(got); err != nil || items != n {
					b.Fatalf("report of %d receipts in %d pages: %v", items, len(got), err)
				}
				readT += time.Since(t)
				pages += int64(len(got))
			}
			b.StopTimer()
			windows := float64(b.N)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / windows }
			b.ReportMetric(ms(hubT), "home-ms/window")
			b.ReportMetric(ms(leafT), "leaves-ms/window")
			b.ReportMetric(ms(reportT), "report-ms/window")
			b.ReportMetric(ms(readT), "verify-report-ms/window")
			b.ReportMetric(float64(msgBytes)/windows, "msg-bytes/window")
			b.ReportMetric(float64(reportBytes)/windows, "report-bytes/window")
			b.ReportMetric(float64(pages)/windows, "report-pages/window")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/1000/windows, "cpu-ms/window")
		})
	}
}
