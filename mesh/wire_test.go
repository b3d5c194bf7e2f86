package mesh

import (
	"bufio"
	"bytes"
	"errors"
	"slices"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

func TestPEXMessageLimits(t *testing.T) {
	sum := func(b byte) descriptorSum { return descriptorSum{b} }
	full := pexMessage{
		descriptors: [][]byte{[]byte("abc"), []byte("de")},
		offer:       []descriptorSum{sum(1), sum(2)},
		want:        []descriptorSum{sum(3)},
	}
	ok := appendPEXMessage(nil, full)
	empty := pexMessage{descriptors: [][]byte{}, offer: []descriptorSum{}, want: []descriptorSum{}}
	tests := []struct {
		name     string
		data     []byte
		maxCount int
		maxBytes int
		want     pexMessage
		wantErr  bool
	}{
		{"all three lists", ok, 2, 3, full, false},
		{"empty lists", appendPEXMessage(nil, pexMessage{}), 2, 3, empty, false},
		{"offer only", appendPEXMessage(nil, pexMessage{offer: full.offer}), 2, 3,
			pexMessage{descriptors: [][]byte{}, offer: full.offer, want: []descriptorSum{}}, false},
		{"too many descriptors", appendPEXMessage(nil, pexMessage{descriptors: full.descriptors}), 1, 3, pexMessage{}, true},
		{"too many offered", appendPEXMessage(nil, pexMessage{offer: full.offer}), 1, 3, pexMessage{}, true},
		{"too many wanted", appendPEXMessage(nil, pexMessage{want: full.offer}), 1, 3, pexMessage{}, true},
		{"too big", ok, 2, 2, pexMessage{}, true},
		{"empty descriptor", []byte{1, 0, 0, 0}, 2, 3, pexMessage{}, true},
		{"truncated sum", ok[:len(ok)-1], 2, 3, pexMessage{}, true},
		{"no wanted list", appendPEXMessage(nil, pexMessage{})[:2], 2, 3, pexMessage{}, true},
		{"no count", nil, 2, 3, pexMessage{}, true},
		{"overlong varint", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 2, 3, pexMessage{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readPEXMessage(bufio.NewReader(bytes.NewReader(tc.data)), tc.maxCount, tc.maxBytes)
			if tc.wantErr {
				if !errors.Is(err, ErrPEXMalformed) {
					t.Fatalf("err = %v, want ErrPEXMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got.descriptors, tc.want.descriptors, bytes.Equal) ||
				!slices.Equal(got.offer, tc.want.offer) || !slices.Equal(got.want, tc.want.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzPEXMessage(f *testing.F) {
	f.Add(appendPEXMessage(nil, pexMessage{descriptors: [][]byte{[]byte("eyJhbGciOiJFZERTQSJ9.e30.c2ln")}}))
	f.Add(appendPEXMessage(nil, pexMessage{offer: []descriptorSum{{1}}, want: []descriptorSum{{2}, {3}}}))
	f.Add(appendPEXMessage(nil, pexMessage{}))
	f.Add([]byte{5, 1, 'a'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readPEXMessage(bufio.NewReader(bytes.NewReader(data)), 8, 64)
		if err != nil {
			if !errors.Is(err, ErrPEXMalformed) {
				t.Fatalf("error %v does not wrap ErrPEXMalformed", err)
			}
			return
		}
		if len(got.descriptors) > 8 || len(got.offer) > 8 || len(got.want) > 8 {
			t.Fatalf("%d descriptors, %d offered, %d wanted passed a limit of 8", len(got.descriptors), len(got.offer), len(got.want))
		}
		again := appendPEXMessage(nil, got)
		if !bytes.HasPrefix(data, again) {
			t.Fatalf("re-encoding %+v gives %x, not a prefix of the input %x", got, again, data)
		}
	})
}

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
