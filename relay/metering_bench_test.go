package relay

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
)

// BenchmarkIngestMetering is the relay's ingest (8 connections) with
// metering off and on in the same run. "On" adds to every stored event
// what a node's metering adds on that path: the event is forwarded by
// gossip to its mesh peers and each forward is metered (two Records per
// peer, 8 peers, as meter.GossipTracer does). docs/benchmarks.md
// "Metering" has the figures.
func BenchmarkIngestMetering(b *testing.B) {
	peers := make([]peer.ID, 8)
	for i := range peers {
		peers[i] = peer.ID(fmt.Sprintf("peer-%d", i))
	}
	for _, on := range []bool{false, true, true, false} { // ABBA: cancels an order bias
		b.Run(fmt.Sprintf("metering=%v", on), func(b *testing.B) {
			r, _, url := benchRelay(b)
			if on {
				m := meter.New("self", time.Hour, time.Now())
				r.OnStored = append(r.OnStored, func(ev *nostr.Event, _ Origin) {
					n := uint64(len(ev.Content) + 200)
					for _, p := range peers {
						m.Record(p, meter.Events, meter.Gave, 1)
						m.Record(p, meter.Bytes, meter.Gave, n)
					}
				})
			}
			const conns = 8
			evs := signEvents(b, b.N, 64)
			frames := make([][]byte, len(evs))
			for i, e := range evs {
				frames[i] = append(e.AppendJSON([]byte(`["EVENT",`)), ']')
			}
			wss := make([]*websocket.Conn, conns)
			for i := range wss {
				wss[i] = benchDial(b, url)
			}
			b.ResetTimer()
			cpu := cpuTime(b)
			var wg sync.WaitGroup
			errs := make(chan error, 2*conns)
			for ci, ws := range wss {
				var mine [][]byte
				for i := ci; i < len(frames); i += conns {
					mine = append(mine, frames[i])
				}
				wg.Go(func() {
					for _, f := range mine {
						if err := ws.WriteMessage(websocket.TextMessage, f); err != nil {
							errs <- err
							return
						}
					}
				})
				wg.Go(func() {
					ws.SetReadDeadline(time.Now().Add(time.Minute))
					for range mine {
						_, msg, err := ws.ReadMessage()
						if err != nil {
							errs <- err
							return
						}
						if !bytes.Contains(msg, []byte(`,true,`)) {
							errs <- fmt.Errorf("relay answered %s", msg)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
