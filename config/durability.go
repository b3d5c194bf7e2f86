package config

import (
	"fmt"
	"time"
)

// maxReplication is the largest R: every one of the 256 author shards
// on every storage node.
const maxReplication = 256

// validateDurability checks the [mesh] keys of durability and content
// routing (spec/mesh-placement.md).
func (m *MeshConfig) validateDurability() error {
	if m.Replication < 1 || m.Replication > maxReplication {
		return fmt.Errorf("mesh.replication %d: must be 1 to %d", m.Replication, maxReplication)
	}
	if m.OfferStorage {
		if m.StorageMaxBytes == 0 {
			return fmt.Errorf("mesh.storage_max_bytes must be > 0 while mesh.offer_storage is true")
		}
		if m.StorageRetention.Duration < time.Second {
			return fmt.Errorf("mesh.storage_retention %s: write a duration of at least 1s, e.g. \"2160h\"", m.StorageRetention)
		}
	}
	if m.DurableSyncPeers < 0 || m.LookupProviders < 0 || m.LookupDHTIDs < 0 {
		return fmt.Errorf("mesh.durable_sync_peers, mesh.lookup_providers and mesh.lookup_dht_ids must be >= 0")
	}
	return nil
}
