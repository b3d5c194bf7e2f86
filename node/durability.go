package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// provideStored announces in the DHT every event the node stores in a
// shard it holds for durability, whatever brought it (a client, GossipSub
// or anti-entropy); the mesh bounds the cost.
func (mp *meshPart) provideStored(rl *relay.Relay) {
	rl.OnStored = append(rl.OnStored, func(ev *nostr.Event, _ relay.Origin) {
		mp.m.ProvideEvent(ev)
	})
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
