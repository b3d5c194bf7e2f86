package config

import (
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
)

// TestSyncScheduler checks that each [mesh] key of the sync scheduler
// reaches its field, and that a bad filter is refused with its key.
func TestSyncScheduler(t *testing.T) {
	m := Default().Mesh
	m.Subscribe = []string{`{"kinds":[1]}`, `{}`}
	m.SyncInterval = setting.DurationOf(90 * time.Second)
	m.LookupPeers, m.DurableSyncPeers, m.LookupProviders, m.LookupDHTIDs = 17, 9, 4, 18
	sc, err := m.SyncScheduler()
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Filters) != 2 || len(sc.Filters[0].Kinds) != 1 || sc.Filters[0].Kinds[0] != 1 || sc.Filters[1].Kinds != nil {
		t.Fatalf("filters %+v, want kinds [1] and everything", sc.Filters)
	}
	if sc.Every != 90*time.Second || sc.LookupPeers != 17 || sc.DurablePeers != 9 || sc.Providers != 4 || sc.DHTIDs != 18 {
		t.Fatalf("scheduler config %+v does not carry the keys", sc)
	}
	m.Subscribe = []string{`{"kinds":`}
	if _, err := m.SyncScheduler(); err == nil {
		t.Fatal("a bad mesh.subscribe filter was taken")
	}
}
