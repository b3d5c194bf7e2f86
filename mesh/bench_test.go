package mesh

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// BenchmarkPropagation measures live propagation in an in-memory mesh of
// 20 and 100 nodes, all subscribed to one shard, each connected to a ring
// neighbour and 8 random peers. One iteration publishes one event at a
// random node and waits until every other node's sink has it. Reported:
// latency from Publish to each node's sink (p50, p99 over all deliveries)
// and GossipSub RPC bytes sent per event per node (messages, gossip and
// control; before yamux and Noise framing).
//
//	go test -run '^$' -bench BenchmarkPropagation -benchtime 200x ./mesh/
func BenchmarkPropagation(b *testing.B) {
	for _, count := range []int{20, 100} {
		b.Run(fmt.Sprintf("nodes=%d", count), func(b *testing.B) {
			benchPropagation(b, count)
		})
	}
}

func benchPropagation(b *testing.B, count int) {
	au := newAuthor(b)
	mn, nodes := newMockMesh(b, count, func(int, []*testNode) Config {
		cfg := testConfig()
		cfg.ConnLowWater = 1 // the benchmark wires the graph itself
		return cfg
	}, func(int) Hooks { return Hooks{} })
	connect := func(i, j int) {
		if i == j || nodes[i].h.Network().Connectedness(nodes[j].h.ID()) == network.Connected {
			return
		}
		if _, err := mn.ConnectPeers(nodes[i].h.ID(), nodes[j].h.ID()); err != nil {
			b.Fatal(err)
		}
	}
	all := make([]int, count)
	for i := range nodes {
		all[i] = i
		connect(i, (i+1)%count)
		for range 8 {
			connect(i, rand.IntN(count))
		}
		if err := nodes[i].m.Subscribe(au.shard); err != nil {
			b.Fatal(err)
		}
	}
	eventually(b, 60*time.Second, "the shard's GossipSub meshes connected", func() bool {
		return shardGraphConnected(b, nodes, all, nil, au.shard)
	})
	sentBefore := uint64(0)
	for _, n := range nodes {
		sentBefore += n.m.Stats().RPCBytesSent
	}
	var latencies []time.Duration
	b.ResetTimer()
	events := 0
	for b.Loop() {
		from := rand.IntN(count)
		ev := au.event(b, 1, fmt.Sprintf("benchmark event %d", events))
		start := time.Now()
		if err := nodes[from].m.Publish(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
		eventually(b, 30*time.Second, "every node has the event", func() bool {
			for i, n := range nodes {
				if i != from && !n.sink.has(ev.ID) {
					return false
				}
			}
			return true
		})
		for i, n := range nodes {
			if i != from {
				at, _ := n.sink.receivedAt(ev.ID)
				latencies = append(latencies, at.Sub(start))
			}
		}
		events++
	}
	b.StopTimer()
	sent := uint64(0)
	for _, n := range nodes {
		sent += n.m.Stats().RPCBytesSent
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(sent-sentBefore)/float64(events)/float64(count), "bytes/event/node")
	b.ReportMetric(0, "ns/op") // wall time per op is the poll loop's, not a figure of merit
}
