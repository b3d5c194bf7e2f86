package node

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/label"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// fixedStanding gives one labeller standing.
type fixedStanding map[string]float64

func (f fixedStanding) Of(did string) float64 { return f[did] }

// BenchmarkLabelToEffect is the time from a label's publication at one
// node of a 10-node mocknet mesh (every node subscribing to everything,
// as by default, each with the labels' policy on its relay as a node
// wires it, hookLabels) to its effect at every node: each refuses the
// labelled author. The labeller has standing at every node; what is
// measured is the label's way over the mesh (GossipSub, then the relay's
// hooks), not standing. It reports the mean and the slowest.
func BenchmarkLabelToEffect(b *testing.B) {
	const nodes = 10
	labeller, err := identity.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	lsk, err := nostr.GenerateSecretKey()
	if err != nil {
		b.Fatal(err)
	}
	policies := make([]*label.Policy, nodes)
	_, parts := startParts(b, nodes, func(i int, parts []*testPart) partSpec {
		s := testSpec()
		s.node.Mesh.Subscribe = []string{"{}"}
		if i > 0 {
			s.mesh.Bootstrap = []string{parts[0].p2pAddr()}
		}
		cfg := label.DefaultConfig()
		cfg.Policy = label.ActionRefuse
		p, err := label.NewPolicy(cfg, label.Options{Standing: fixedStanding{labeller.DID(): 0.01}})
		if err != nil {
			b.Fatal(err)
		}
		policies[i] = p
		s.hooks = func(rl *relay.Relay) { hookLabels(rl, p) }
		return s
	})
	for _, p := range parts {
		if err := p.mp.m.Subscribe(mesh.AllShards()...); err != nil {
			b.Fatal(err)
		}
	}
	// The mesh is up once an event published at the last node reaches
	// every node.
	probeKey, _ := nostr.GenerateSecretKey()
	probe := note(b, probeKey, "probe")
	parts[nodes-1].publish(b, probe)
	eventually(b, 60*time.Second, "the probe everywhere", func() bool {
		for _, p := range parts {
			if !p.holds(b, probe.ID) {
				return false
			}
		}
		return true
	})
	var took []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		spammer, _ := nostr.GenerateSecretKey()
		spam := note(b, spammer, fmt.Sprint("spam ", i))
		pk := spammer.PubKey()
		ev, err := label.New(labeller, lsk, label.Spam, label.Target{Kind: label.Author, Value: fmt.Sprintf("%x", pk[:])}, "", time.Now().Unix(), 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		parts[i%nodes].publish(b, ev)
		eventually(b, 60*time.Second, "the label's effect everywhere", func() bool {
			for _, p := range policies {
				if p.Verdict(spam) == nil {
					return false
				}
			}
			return true
		})
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	b.ReportMetric(float64(sum.Milliseconds())/float64(len(took)), "ms/label-mean")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "ms/label-max")
}
