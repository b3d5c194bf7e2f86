package main

import (
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/node"
)

// TestReplicationWords: shards below R with fewer storage nodes than R is
// said to be expected; with enough storage nodes, it is not.
func TestReplicationWords(t *testing.T) {
	cases := []struct {
		sh   node.StatusShards
		want string
	}{
		{node.StatusShards{BelowReplication: 256, Replication: 3, StorageNodes: 1}, "256 of all below R=3 over 1 storage nodes (expected: the mesh has fewer storage nodes than R"},
		{node.StatusShards{BelowReplication: 4, Replication: 3, StorageNodes: 5}, "(being repaired; if it stays, storage nodes were lost"},
		{node.StatusShards{Replication: 3, StorageNodes: 5}, "every shard has R=3 copies over 5 storage nodes"},
	}
	for _, tc := range cases {
		if got := replicationWords(tc.sh); !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.sh, got, tc.want)
		}
	}
}

// TestErrorLine: an error with a multi-line attribute and a count is one
// bounded line.
func TestErrorLine(t *testing.T) {
	e := node.StatusError{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Level: "WARN", Message: "mesh: dial failed", Count: 12,
		Attrs: map[string]string{"err": "failed to dial:\n  * [/ip4/10.0.0.1/tcp/4001] dial tcp: timeout\n" + strings.Repeat("  * more\n", 50)}}
	l := errorLine(e)
	if strings.Contains(l, "\n") || len([]rune(l)) > maxErrorLine+2 {
		t.Fatalf("not one bounded line (%d runes): %q", len([]rune(l)), l)
	}
	if !strings.HasPrefix(l, "  2026-01-02T03:04:05Z WARN mesh: dial failed (×12) err=failed to dial: * [/ip4/10.0.0.1/tcp/4001]") || !strings.HasSuffix(l, "…") {
		t.Fatalf("line %q", l)
	}
}
