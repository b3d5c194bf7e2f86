package config

import (
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
)

// TestDurabilityKeys checks the [mesh] keys of durability and content
// routing: the defaults pass, and each bad value names its key.
func TestDurabilityKeys(t *testing.T) {
	cases := []struct {
		name string
		edit func(m *MeshConfig)
		key  string // "" means valid
	}{
		{"defaults", func(*MeshConfig) {}, ""},
		{"R = 1", func(m *MeshConfig) { m.Replication = 1 }, ""},
		{"R = 0", func(m *MeshConfig) { m.Replication = 0 }, "mesh.replication"},
		{"R too large", func(m *MeshConfig) { m.Replication = 257 }, "mesh.replication"},
		{"no bytes offered", func(m *MeshConfig) { m.StorageMaxBytes = 0 }, "mesh.storage_max_bytes"},
		{"no offer, no bytes", func(m *MeshConfig) { m.OfferStorage, m.StorageMaxBytes = false, 0 }, ""},
		{"retention under a second", func(m *MeshConfig) { m.StorageRetention = setting.DurationOf(10 * time.Millisecond) }, "mesh.storage_retention"},
		{"negative lookups", func(m *MeshConfig) { m.LookupProviders = -1 }, "mesh.lookup_providers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			c.edit(&cfg.Mesh)
			err := cfg.Validate()
			if c.key == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("error %v, want one naming %s", err, c.key)
			}
		})
	}
}
