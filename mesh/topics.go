package mesh

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"fleetmesh.org/fleetmesh/nostr"
)

// ShardCount is the fixed number of author shards (spec/mesh-topics.md).
// Changing it changes every event's topic, so it is part of the topic
// scheme's version, not a setting.
const ShardCount = 256

// TopicPrefix is the GossipSub topic name of author shard s without s.
const TopicPrefix = "/fleetmesh/events/1/author/"

// ShardOf returns the author shard of a Nostr public key: the first two
// bytes of SHA-256(pubkey), big-endian, modulo ShardCount. The hash is there
// because vanity keys are ground for their leading bytes, which would crowd
// them into a few shards.
func ShardOf(pubkey [32]byte) int {
	h := sha256.Sum256(pubkey[:])
	return int(binary.BigEndian.Uint16(h[:2])) % ShardCount
}

// Topic returns the GossipSub topic of shard s (0 <= s < ShardCount).
func Topic(shard int) string {
	return TopicPrefix + strconv.Itoa(shard)
}

// ParseTopic returns the shard a topic name stands for. Only the exact form
// Topic writes is accepted (decimal, no sign, no leading zeros), so every
// shard has exactly one name.
func ParseTopic(topic string) (int, error) {
	rest, ok := strings.CutPrefix(topic, TopicPrefix)
	if !ok {
		return 0, fmt.Errorf("mesh: topic %q is not a fleetmesh event topic", topic)
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || n >= ShardCount || strconv.Itoa(n) != rest {
		return 0, fmt.Errorf("mesh: topic %q: shard must be 0 to %d in plain decimal", topic, ShardCount-1)
	}
	return n, nil
}

// ShardsFor returns the shards a node must subscribe to so that it
// receives every replicated event matching any of filters, in increasing
// order. A filter naming authors needs only their shards; a filter without
// authors could match any author and needs all of them, unless it can match
// only ephemeral kinds (never replicated) or nothing at all.
func ShardsFor(filters []nostr.Filter) []int {
	var want [ShardCount]bool
	for i := range filters {
		f := &filters[i]
		if matchesNothingReplicated(f) {
			continue
		}
		if f.Authors == nil {
			return AllShards()
		}
		for _, a := range f.Authors {
			want[ShardOf(a)] = true
		}
	}
	var out []int
	for s, ok := range want {
		if ok {
			out = append(out, s)
		}
	}
	return out
}

func matchesNothingReplicated(f *nostr.Filter) bool {
	if (f.IDs != nil && len(f.IDs) == 0) || (f.Authors != nil && len(f.Authors) == 0) {
		return true
	}
	if f.Kinds == nil {
		return false
	}
	for _, k := range f.Kinds {
		if nostr.ClassOf(k) != nostr.Ephemeral {
			return false
		}
	}
	return true
}

// AllShards returns every shard, 0 to ShardCount-1.
func AllShards() []int {
	out := make([]int, ShardCount)
	for i := range out {
		out[i] = i
	}
	return out
}
