package config

import "fleetmesh.org/fleetmesh/meshsync"

// SyncScheduler is the [mesh] keys that say when the node syncs and how
// far a lookup goes, as meshsync.Scheduler takes them: the filters of
// subscribe, sync_interval (0 takes the scheduler's default),
// lookup_peers, durable_sync_peers, lookup_providers and lookup_dht_ids.
func (m *MeshConfig) SyncScheduler() (meshsync.SchedulerConfig, error) {
	filters, err := m.SubscribeFilters()
	if err != nil {
		return meshsync.SchedulerConfig{}, err
	}
	return meshsync.SchedulerConfig{
		Filters:      filters,
		Every:        m.SyncInterval.Duration,
		LookupPeers:  m.LookupPeers,
		DurablePeers: m.DurableSyncPeers,
		Providers:    m.LookupProviders,
		DHTIDs:       m.LookupDHTIDs,
	}, nil
}
