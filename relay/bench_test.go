package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

// benchRelay serves a relay on a fresh store over loopback, through
// Relay.Listener as the node serves it, with the rate limits off so that
// the relay, not the policy, is what is measured.
func benchRelay(b *testing.B) (*Relay, *store.Store, string) {
	b.Helper()
	st, err := store.Open(b.TempDir(), store.Options{SweepEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EventsPerSecond, cfg.IPEventsPerSecond = 0, 0
	r := New(cfg, st, nil, nil)
	srv := startServer(r, (*Relay).Listener, false)
	b.Cleanup(func() {
		r.Shutdown(context.Background())
		srv.Close()
		st.Close()
	})
	return r, st, "ws" + strings.TrimPrefix(srv.URL, "http")
}

// signEvents signs n distinct kind-1 notes, spread over keys, on every
// core; the benchmarks do this before their timer starts.
func signEvents(b *testing.B, n, keys int) []*nostr.Event {
	b.Helper()
	ks := make([]nostr.SecretKey, keys)
	for i := range ks {
		k, err := nostr.GenerateSecretKey()
		if err != nil {
			b.Fatal(err)
		}
		ks[i] = k
	}
	evs := make([]*nostr.Event, n)
	now := time.Now().Unix() - int64(n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Bool
	for range 4 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				e := &nostr.Event{
					CreatedAt: now + int64(i),
					Kind:      1,
					Tags:      nostr.Tags{{"p", fmt.Sprintf("%x", ks[(i+1)%keys].PubKey())}, {"t", "bench"}},
					Content:   fmt.Sprintf("benchmark note %d, about as long as a short reply usually is.", i),
				}
				if ks[i%keys].Sign(e) != nil {
					failed.Store(true)
				}
				evs[i] = e
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		b.Fatal("signing failed")
	}
	return evs
}

// cpuTime is the CPU time the whole process has used (relay, store and the
// benchmark's clients); per event it is steadier than wall time on a
// shared machine.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchDial(b *testing.B, url string) *websocket.Conn {
	b.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	// The relay greets with its AUTH challenge.
	if _, _, err := ws.ReadMessage(); err != nil {
		b.Fatal(err)
	}
	return ws
}

// BenchmarkIngest publishes pre-signed events over conns WebSocket
// connections, each pipelining its EVENTs and reading its OKs concurrently,
// through the whole path: parse, verify, durable save, OK.
func BenchmarkIngest(b *testing.B) {
	for _, conns := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			_, _, url := benchRelay(b)
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
						if !bytes.HasPrefix(msg, []byte(`["OK",`)) || !bytes.Contains(msg, []byte(`,true,`)) {
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

// BenchmarkReq measures REQ to EOSE round trips on one connection against
// a store of 20,000 events, reporting the median and 99th percentile.
func BenchmarkReq(b *testing.B) {
	const stored = 20_000
	_, st, url := benchRelay(b)
	evs := signEvents(b, stored, 200)
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < len(evs); i += 64 {
				if _, err := st.Save(context.Background(), evs[i]); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	shapes := []struct{ name, filter string }{
		{"authors+kinds/limit20", fmt.Sprintf(`{"authors":["%x","%x"],"kinds":[1],"limit":20}`, evs[0].PubKey, evs[1].PubKey)},
		{"tag-p/limit100", fmt.Sprintf(`{"#p":["%x"],"limit":100}`, evs[7].PubKey)},
		{"kind/limit100", `{"kinds":[1],"limit":100}`},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			ws := benchDial(b, url)
			var lat []time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				req := fmt.Sprintf(`["REQ","q%d",%s]`, n, sh.filter)
				if err := ws.WriteMessage(websocket.TextMessage, []byte(req)); err != nil {
					b.Fatal(err)
				}
				got := 0
				for {
					_, msg, err := ws.ReadMessage()
					if err != nil {
						b.Fatal(err)
					}
					var head []json.RawMessage
					if err := json.Unmarshal(msg, &head); err != nil || len(head) < 2 {
						b.Fatalf("relay sent %s", msg)
					}
					if string(head[0]) == `"EOSE"` {
						break
					}
					if string(head[0]) != `"EVENT"` {
						b.Fatalf("relay sent %s", msg)
					}
					got++
				}
				if got == 0 {
					b.Fatal("REQ returned no events")
				}
				lat = append(lat, time.Since(start))
				close := fmt.Sprintf(`["CLOSE","q%d"]`, n)
				if err := ws.WriteMessage(websocket.TextMessage, []byte(close)); err != nil {
					b.Fatal(err)
				}
				n++
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
