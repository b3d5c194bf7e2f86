package node

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
)

// quantile is the q-th percentile (nearest rank) of sorted ds, in ms.
func quantile(ds []time.Duration, q int) float64 {
	return float64(ds[(len(ds)*q+99)/100-1]) / float64(time.Millisecond)
}

// BenchmarkMeshREQ measures REQs at node 0 of three storage nodes on
// mocknet, in one run: answered by the store alone (no Lookup hook), with
// lookups whose events the node holds already (the common case once the
// mesh has converged), and with lookups that bring an event the node
// lacks, which the node's rules admit and store before it is served
// (docs/benchmarks/mesh.md). Each reports p50 and p99 in ms.
func BenchmarkMeshREQ(b *testing.B) {
	var holding atomic.Bool
	_, parts := startParts(b, 3, func(i int, ps []*testPart) partSpec {
		s := testSpec()
		if i > 0 {
			s.mesh.Bootstrap = []string{ps[0].p2pAddr()}
		} else {
			s.hold = func(*nostr.Event, bool) bool { return holding.Load() }
		}
		return s
	})
	agreeOnAll(b, parts)
	k, _ := nostr.GenerateSecretKey()
	var held []*nostr.Event
	for i := range 50 {
		ev := note(b, k, fmt.Sprint("held everywhere ", i))
		parts[1].publish(b, ev)
		held = append(held, ev)
	}
	eventually(b, 60*time.Second, "every node holds the notes", func() bool {
		for _, p := range parts {
			for _, ev := range held {
				if !p.holds(b, ev.ID) {
					return false
				}
			}
		}
		return true
	})
	c := dialPart(b, parts[0])
	author := `{"authors":["` + fmt.Sprintf("%x", k.PubKey()) + `"],"limit":20}`
	run := func(name string, setup func(i int) string) {
		b.Run(name, func(b *testing.B) {
			var ds []time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				f := setup(i)
				i++
				b.StartTimer()
				_, took := c.req(f)
				ds = append(ds, took)
			}
			slices.Sort(ds)
			b.ReportMetric(quantile(ds, 50), "p50-ms")
			b.ReportMetric(quantile(ds, 99), "p99-ms")
		})
	}
	lookup := parts[0].rl.Lookup
	parts[0].rl.Lookup = nil
	run("store-only", func(int) string { return author })
	parts[0].rl.Lookup = lookup
	run("lookups-held", func(int) string { return author })
	holding.Store(true)
	other, _ := nostr.GenerateSecretKey()
	run("lookups-new", func(i int) string {
		ev := note(b, other, fmt.Sprint("only elsewhere ", i))
		parts[1].publish(b, ev)
		return `{"ids":["` + ev.IDHex() + `"]}`
	})
}

// BenchmarkMeshConvergence publishes, at a random node of ten storage
// nodes on mocknet (R = 3), a new note, waits until every holder of its
// author's shard stores it, then its deletion, at another random node,
// and waits until no holder stores the note; it reports each convergence
// time's p50 and p99 in ms (docs/benchmarks/mesh.md). (A publisher that
// is not a holder keeps its client's note until the hand-off removes it,
// spec/mesh-placement.md; GossipSub does not reach it.)
func BenchmarkMeshConvergence(b *testing.B) {
	const count, rounds = 10, 20
	_, parts := startParts(b, count, func(i int, ps []*testPart) partSpec {
		s := testSpec()
		if i > 0 {
			s.mesh.Bootstrap = []string{ps[0].p2pAddr()}
		}
		return s
	})
	agreeOnAll(b, parts)
	r := rand.New(rand.NewPCG(30, 30))
	k, _ := nostr.GenerateSecretKey()
	holders := holderIndexes(parts)(mesh.ShardOf(k.PubKey()))
	within := func(what string, cond func() bool) time.Duration {
		start := time.Now()
		for !cond() {
			if time.Since(start) > time.Minute {
				b.Fatalf("not within a minute: %s", what)
			}
			time.Sleep(2 * time.Millisecond)
		}
		return time.Since(start)
	}
	for b.Loop() {
		var news, dels []time.Duration
		for i := range rounds {
			at := parts[r.IntN(count)]
			ev := note(b, k, fmt.Sprint("round ", i))
			at.publish(b, ev)
			news = append(news, within("a new event at every holder", func() bool {
				for _, h := range holders {
					if !parts[h].holds(b, ev.ID) {
						return false
					}
				}
				return true
			}))
			at = parts[r.IntN(count)]
			del := signedAt(b, k, time.Now().Unix(), 5, "", []string{"e", ev.IDHex()})
			at.publish(b, del)
			dels = append(dels, within("a deletion at every holder", func() bool {
				for _, h := range holders {
					if parts[h].holds(b, ev.ID) {
						return false
					}
				}
				return true
			}))
		}
		slices.Sort(news)
		slices.Sort(dels)
		b.ReportMetric(quantile(news, 50), "new-p50-ms")
		b.ReportMetric(quantile(news, 99), "new-p99-ms")
		b.ReportMetric(quantile(dels, 50), "del-p50-ms")
		b.ReportMetric(quantile(dels, 99), "del-p99-ms")
	}
}
