package node

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/placement"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// storageOffer is the storage offer of the node's descriptor, which makes
// it a storage node for placement (spec/mesh-placement.md); nil when the
// operator turned it off or the node is a leaf.
func storageOffer(cfg config.Config) *descriptor.StorageOffer {
	if !cfg.Mesh.OfferStorage || cfg.Class == config.ClassLeaf {
		return nil
	}
	keep := cfg.Mesh.StorageRetention.Duration // Validate has held it to 1s or more
	return &descriptor.StorageOffer{MaxBytes: cfg.Mesh.StorageMaxBytes, RetentionSeconds: uint64(keep / time.Second)}
}

// provideStored announces in the DHT every event the node stores in a
// shard it holds for durability, whatever brought it (a client, GossipSub
// or anti-entropy); the mesh bounds the cost.
func (mp *meshPart) provideStored(rl *relay.Relay) {
	rl.OnStored = append(rl.OnStored, func(ev *nostr.Event, _ relay.Origin) {
		mp.m.ProvideEvent(ev)
	})
}

// runDurable is the anti-entropy of the shards the node holds for
// durability: a round every sync interval, and one as soon as the
// placement changes, so that a newly held shard fills without waiting.
func (mp *meshPart) runDurable(ctx context.Context, log *slog.Logger) {
	periodic.Run(ctx, firstRound, mp.every, mp.m.PlacementChanges(), func() { mp.syncDurable(ctx, log) })
}

// syncDurable runs one round: sessions with co-holders chosen so that
// every held shard is reconciled with at least one other holder, at most
// durablePeers sessions. A node whose own filters take every event (the
// default, "{}") reconciles everything in its filter sessions already and
// runs none.
func (mp *meshPart) syncDurable(ctx context.Context, log *slog.Logger) {
	if slices.ContainsFunc(mp.filters, takesAll) {
		return
	}
	pl := mp.m.Placement()
	for _, s := range planDurableSync(pl, mp.m.Host().ID(), mp.m.Durable(), mp.durablePeers) {
		st, err := mp.sync.SyncShards(ctx, s.peer, s.shards)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Debug("mesh: durable sync", "peer", s.peer, "shards", len(s.shards), "err", err)
			// A holder that cannot be reached may be dead: the mesh
			// probes it and places without it if so.
			mp.m.ReportUnreachable(s.peer)
			continue
		}
		if st.Need+st.Have > 0 {
			log.Info("mesh: durable sync", "peer", s.peer, "shards", len(s.shards), "fetched", st.Fetched, "pushed", st.Pushed, "rounds", st.Rounds)
		}
	}
}

// takesAll reports whether f matches every event.
func takesAll(f nostr.Filter) bool {
	return f.IDs == nil && f.Authors == nil && f.Kinds == nil && len(f.Tags) == 0 &&
		f.Since == 0 && !f.HasUntil && !f.HasLimit && f.Search == ""
}

// durableSession is one anti-entropy session: the shards both this node
// and peer hold.
type durableSession struct {
	peer   peer.ID
	shards []int
}

// planDurableSync picks at most max co-holders of held (other than self)
// so that as many held shards as possible have one, greedily: each pick is
// the co-holder sharing most still uncovered shards, ties broken at
// random so that rounds spread over all co-holders. A session covers every
// shard the two share, not only the uncovered ones: it costs one store
// scan either way.
func planDurableSync(pl placement.Placement, self peer.ID, held []int, max int) []durableSession {
	shared := map[peer.ID][]int{}
	for _, s := range held {
		for _, p := range pl.Holders(s) {
			if p != self {
				shared[p] = append(shared[p], s)
			}
		}
	}
	candidates := make([]peer.ID, 0, len(shared))
	for p := range shared {
		candidates = append(candidates, p)
	}
	slices.Sort(candidates)
	rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	uncovered := map[int]bool{}
	for _, s := range held {
		uncovered[s] = true
	}
	var out []durableSession
	for len(out) < max && len(uncovered) > 0 {
		best, bestN := -1, 0
		for i, p := range candidates {
			n := 0
			for _, s := range shared[p] {
				if uncovered[s] {
					n++
				}
			}
			if n > bestN {
				best, bestN = i, n
			}
		}
		if best < 0 {
			break // no co-holder left for the uncovered shards
		}
		p := candidates[best]
		candidates = slices.Delete(candidates, best, best+1)
		for _, s := range shared[p] {
			delete(uncovered, s)
		}
		out = append(out, durableSession{peer: p, shards: shared[p]})
	}
	return out
}

// meshCollector exports the mesh's durability and content routing
// counters to the node's Prometheus registry, read at scrape time.
type meshCollector struct {
	m *mesh.Mesh

	durableShards, storageNodes, placementChanges *prometheus.Desc
	provides, providerLookups, providersFound     *prometheus.Desc
}

func newMeshCollector(m *mesh.Mesh) *meshCollector {
	return &meshCollector{
		m:                m,
		durableShards:    prometheus.NewDesc("fleetmesh_mesh_durable_shards", "Author shards this node holds for durability.", nil, nil),
		storageNodes:     prometheus.NewDesc("fleetmesh_mesh_storage_nodes", "Storage nodes the placement is computed over.", nil, nil),
		placementChanges: prometheus.NewDesc("fleetmesh_mesh_placement_changes_total", "Placement recomputations that changed the placement.", nil, nil),
		provides:         prometheus.NewDesc("fleetmesh_mesh_provides_total", "Event CID announcements in the DHT, by outcome.", []string{"result"}, nil),
		providerLookups:  prometheus.NewDesc("fleetmesh_mesh_provider_lookups_total", "DHT searches for the providers of an event CID.", nil, nil),
		providersFound:   prometheus.NewDesc("fleetmesh_mesh_providers_found_total", "Providers those searches returned.", nil, nil),
	}
}

func (c *meshCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.durableShards, c.storageNodes, c.placementChanges, c.provides, c.providerLookups, c.providersFound} {
		ch <- d
	}
}

func (c *meshCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	ch <- prometheus.MustNewConstMetric(c.durableShards, prometheus.GaugeValue, float64(len(s.DurableShards)))
	ch <- prometheus.MustNewConstMetric(c.storageNodes, prometheus.GaugeValue, float64(s.StorageNodes))
	ch <- prometheus.MustNewConstMetric(c.placementChanges, prometheus.CounterValue, float64(s.PlacementChanges))
	for result, v := range map[string]uint64{"queued": s.ProvideQueued, "dropped": s.ProvideDropped, "provided": s.Provided, "failed": s.ProvideFailed} {
		ch <- prometheus.MustNewConstMetric(c.provides, prometheus.CounterValue, float64(v), result)
	}
	ch <- prometheus.MustNewConstMetric(c.providerLookups, prometheus.CounterValue, float64(s.ProviderLookups))
	ch <- prometheus.MustNewConstMetric(c.providersFound, prometheus.CounterValue, float64(s.ProvidersFound))
}
