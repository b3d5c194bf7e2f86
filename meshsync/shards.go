package meshsync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
)

// shardSet restricts a session to the events whose author is in one of
// the set's shards (spec/mesh-sync.md, "Shard option"). A nil set
// restricts nothing.
type shardSet *[mesh.ShardCount]bool

// openOptions is the optional fifth element of NEG-OPEN.
type openOptions struct {
	Shards []int `json:"shards"`
	// HandOff asks the peer to take the events as a holder of the shards
	// (handoff.go).
	HandOff bool `json:"handoff,omitempty"`
}

// newShardSet checks shards (1 to ShardCount of them, each in range, none
// repeated) and returns them as a set.
func newShardSet(shards []int) (shardSet, error) {
	if len(shards) == 0 || len(shards) > mesh.ShardCount {
		return nil, fmt.Errorf("invalid: shards lists %d shards, want 1 to %d", len(shards), mesh.ShardCount)
	}
	set := new([mesh.ShardCount]bool)
	for _, s := range shards {
		if s < 0 || s >= mesh.ShardCount {
			return nil, fmt.Errorf("invalid: shard %d out of range 0 to %d", s, mesh.ShardCount-1)
		}
		if set[s] {
			return nil, fmt.Errorf("invalid: shard %d repeated", s)
		}
		set[s] = true
	}
	return set, nil
}

// parseOpenOptions reads NEG-OPEN's options object. Unknown members are
// refused, so that a peer asking for a restriction this version does not
// know learns it at once instead of reconciling the wrong set.
func parseOpenOptions(raw json.RawMessage) (shardSet, openOptions, error) {
	var o openOptions
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return nil, o, fmt.Errorf("invalid: NEG-OPEN options: %v", err)
	}
	if dec.More() {
		return nil, o, fmt.Errorf("invalid: NEG-OPEN options: trailing data")
	}
	if o.Shards == nil {
		return nil, o, fmt.Errorf("invalid: NEG-OPEN options need shards")
	}
	set, err := newShardSet(o.Shards)
	return set, o, err
}

// inShards reports whether ev belongs to set.
func inShards(set shardSet, ev *nostr.Event) bool {
	return set == nil || set[mesh.ShardOf(ev.PubKey)]
}

// SyncShards reconciles this node's events of the authors of shards with
// peer p, as SyncWith does for a filter: it is the anti-entropy of the
// shards a node holds for durability (spec/mesh-placement.md), whose
// authors no filter can list.
func (s *Service) SyncShards(ctx context.Context, p peer.ID, shards []int) (Stats, error) {
	set, err := newShardSet(shards)
	if err != nil {
		return Stats{}, fmt.Errorf("meshsync: %w", err)
	}
	return s.sync(ctx, p, &session{set: set, shards: shards})
}
