package mesh

import (
	"slices"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

func TestTopicNames(t *testing.T) {
	tests := []struct {
		topic string
		shard int
		ok    bool
	}{
		{TopicPrefix + "0", 0, true},
		{TopicPrefix + "255", 255, true},
		{TopicPrefix + "256", 0, false},
		{TopicPrefix + "007", 0, false},
		{TopicPrefix + "-1", 0, false},
		{TopicPrefix + "+1", 0, false},
		{TopicPrefix, 0, false},
		{"/fleetmesh/events/2/author/1", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseTopic(tc.topic)
		if (err == nil) != tc.ok || (tc.ok && got != tc.shard) {
			t.Errorf("ParseTopic(%q) = %d, %v; want %d ok=%v", tc.topic, got, err, tc.shard, tc.ok)
		}
		if tc.ok && Topic(got) != tc.topic {
			t.Errorf("Topic(%d) = %q, want %q", got, Topic(got), tc.topic)
		}
	}
}

func FuzzParseTopic(f *testing.F) {
	f.Add(TopicPrefix + "17")
	f.Add(TopicPrefix + "0017")
	f.Add("/meshsub/1.1.0")
	f.Fuzz(func(t *testing.T, topic string) {
		s, err := ParseTopic(topic)
		if err != nil {
			return
		}
		if s < 0 || s >= ShardCount || Topic(s) != topic {
			t.Fatalf("ParseTopic(%q) = %d, but Topic gives %q", topic, s, Topic(s))
		}
	})
}

func TestShardOfKnownKey(t *testing.T) {
	// SHA-256 of 32 zero bytes starts 66 68 7a ad: 0x6668 = 26216,
	// 26216 mod 256 = 104. The spec page carries this vector.
	if got := ShardOf([32]byte{}); got != 104 {
		t.Fatalf("ShardOf(zero key) = %d, want 104", got)
	}
}

func TestShardsFor(t *testing.T) {
	var k1, k2 [32]byte
	k1[0], k2[0] = 1, 2
	s1, s2 := ShardOf(k1), ShardOf(k2)
	want12 := []int{min(s1, s2), max(s1, s2)}
	if s1 == s2 {
		want12 = []int{s1}
	}
	tests := []struct {
		name    string
		filters []nostr.Filter
		want    []int
	}{
		{"no filters", nil, nil},
		{"authors", []nostr.Filter{{Authors: [][32]byte{k1}}, {Authors: [][32]byte{k2}, Kinds: []int{1}}}, want12},
		{"no authors means all", []nostr.Filter{{Kinds: []int{1}}}, AllShards()},
		{"only ephemeral kinds", []nostr.Filter{{Kinds: []int{20001, 29999}}}, nil},
		{"ephemeral and regular", []nostr.Filter{{Kinds: []int{20001, 1}}}, AllShards()},
		{"empty authors matches nothing", []nostr.Filter{{Authors: [][32]byte{}}}, nil},
		{"empty ids matches nothing", []nostr.Filter{{IDs: [][32]byte{}}}, nil},
		{"ids alone could be anyone's", []nostr.Filter{{IDs: [][32]byte{k1}}}, AllShards()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShardsFor(tc.filters); !slices.Equal(got, tc.want) {
				t.Fatalf("ShardsFor = %v, want %v", got, tc.want)
			}
		})
	}
}
