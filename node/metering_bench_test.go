package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// BenchmarkIngestMetering is a node's relay ingest with metering off and
// on, in the same run, through the real metering path: clients publish
// over 8 WebSocket connections to a node's relay, wired to its mesh as
// openMesh wires it, and the mesh forwards each event by GossipSub to 8
// peers subscribed to its shard (bare GossipSub hosts on the same
// mocknet, so the process's CPU is the ingest node's and not eight
// stores'). With metering on, the node's mesh traces GossipSub with
// meter.GossipTracer and its sync service counts into the meter, as
// node.openMesh wires them; off, neither. docs/benchmarks/accounting.md
// has the command and the figures.
func BenchmarkIngestMetering(b *testing.B) {
	for _, on := range []bool{false, true, true, false} { // ABBA: cancels an order bias
		b.Run(fmt.Sprintf("metering=%v", on), func(b *testing.B) {
			url, keys, m := meteredNode(b, on)
			evs := signNotes(b, b.N, keys)
			frames := make([][]byte, len(evs))
			for i, e := range evs {
				frames[i] = append(e.AppendJSON([]byte(`["EVENT",`)), ']')
			}
			const conns = 8
			wss := make([]*websocket.Conn, conns)
			for i := range wss {
				ws, _, err := websocket.DefaultDialer.Dial(url, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { ws.Close() })
				if _, _, err := ws.ReadMessage(); err != nil { // the AUTH challenge
					b.Fatal(err)
				}
				wss[i] = ws
			}
			b.ResetTimer()
			cpu := processCPU(b)
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
					ws.SetReadDeadline(time.Now().Add(5 * time.Minute))
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
			if on {
				// The real path counted: every event went to a peer.
				var gave uint64
				for _, s := range m.Current().Sides() {
					gave += s.Gave.Events
				}
				if gave < uint64(b.N) {
					b.Fatalf("the meter counted %d events given for %d ingested", gave, b.N)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// meteredNode starts the ingest node (metering on or off) and its 8
// GossipSub peers, and returns the relay's WebSocket URL, the author keys
// whose shards the peers subscribe to, and the node's meter (nil off).
func meteredNode(b *testing.B, on bool) (string, []nostr.SecretKey, *meter.Meter) {
	spec := testSpec()
	rcfg := relay.DefaultConfig()
	rcfg.EventsPerSecond, rcfg.IPEventsPerSecond = 0, 0 // one address, many events
	spec.relay = &rcfg
	var m *meter.Meter
	if on {
		// A day's window: the benchmark never rolls it.
		m = meter.New("", 24*time.Hour, time.Now())
		spec.meter, spec.mesh.GossipTracer = m, meter.GossipTracer(m)
	}
	mn, parts := startParts(b, 1, func(int, []*testPart) partSpec { return spec })
	ingest := parts[0]
	keys := make([]nostr.SecretKey, 8)
	topics := map[string]bool{}
	for i := range keys {
		k, err := nostr.GenerateSecretKey()
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
		topics[mesh.Topic(mesh.ShardOf(k.PubKey()))] = true
	}
	// The peers take what the node forwards, count it and drop it.
	msgID := func(m *pb.Message) string { h := sha256.Sum256(m.GetData()); return string(h[:]) }
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var received atomic.Int64
	for range 8 {
		h, err := mn.GenPeer()
		if err != nil {
			b.Fatal(err)
		}
		ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
			pubsub.WithNoAuthor(), pubsub.WithMessageIdFn(msgID))
		if err != nil {
			b.Fatal(err)
		}
		for name := range topics {
			t, err := ps.Join(name)
			if err != nil {
				b.Fatal(err)
			}
			sub, err := t.Subscribe()
			if err != nil {
				b.Fatal(err)
			}
			go func() {
				for {
					if _, err := sub.Next(ctx); err != nil {
						return
					}
					received.Add(1)
				}
			}()
		}
	}
	if err := mn.LinkAll(); err != nil {
		b.Fatal(err)
	}
	for _, p := range mn.Peers() {
		if p != ingest.h.ID() {
			if _, err := mn.ConnectPeers(ingest.h.ID(), p); err != nil {
				b.Fatal(err)
			}
		}
	}
	srv := httptest.NewServer(ingest.rl)
	b.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	// Warm up until the node forwards to its GossipSub mesh: a note per
	// author, a round a second, until the peers have each note about as
	// many times as GossipSub's mesh degree (6).
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	ws.ReadMessage() // the AUTH challenge
	deadline := time.Now().Add(20 * time.Second)
	for round := 0; ; round++ {
		before := received.Load()
		for i, k := range keys {
			e := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: fmt.Sprintf("warm-up %d %d", round, i)}
			if err := k.Sign(e); err != nil {
				b.Fatal(err)
			}
			ws.WriteMessage(websocket.TextMessage, append(e.AppendJSON([]byte(`["EVENT",`)), ']'))
			ws.ReadMessage()
		}
		time.Sleep(time.Second)
		if received.Load()-before >= int64(6*len(keys)) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the node forwards %d copies of %d notes to its peers", received.Load()-before, len(keys))
		}
	}
	return url, keys, m
}

// signNotes signs n distinct notes by keys, round robin.
func signNotes(b *testing.B, n int, keys []nostr.SecretKey) []*nostr.Event {
	evs := make([]*nostr.Event, n)
	now := time.Now().Unix() - int64(n)
	for i := range evs {
		evs[i] = &nostr.Event{CreatedAt: now + int64(i), Kind: 1, Content: fmt.Sprintf("metering benchmark note %d", i)}
		if err := keys[i%len(keys)].Sign(evs[i]); err != nil {
			b.Fatal(err)
		}
	}
	return evs
}
