package negentropy

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVarint(t *testing.T) {
	cases := []struct {
		v   uint64
		hex string
	}{
		{0, "00"},
		{1, "01"},
		{127, "7f"},
		{128, "8100"},
		{300, "822c"},
		{16384, "818000"},
		{1<<64 - 1, "81ffffffffffffffff7f"},
	}
	for _, c := range cases {
		got := hex.EncodeToString(appendVarint(nil, c.v))
		if got != c.hex {
			t.Errorf("appendVarint(%d) = %s, want %s", c.v, got, c.hex)
		}
		if n := varintLen(c.v); n != len(c.hex)/2 {
			t.Errorf("varintLen(%d) = %d, want %d", c.v, n, len(c.hex)/2)
		}
		v, n, err := readVarint(mustHex(t, c.hex+"ff"))
		if err != nil || v != c.v || n != len(c.hex)/2 {
			t.Errorf("readVarint(%s) = %d, %d, %v", c.hex, v, n, err)
		}
	}
	for _, bad := range []string{"", "80", "ff ff", "82 80 80 80 80 80 80 80 80 00"} {
		if _, _, err := readVarint(mustHex(t, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("readVarint(%q) error = %v, want ErrMalformed", bad, err)
		}
	}
	// A non-minimal encoding is read as its value, as the reference does.
	if v, _, err := readVarint(mustHex(t, "80 80 05")); err != nil || v != 5 {
		t.Errorf("non-minimal varint: %d, %v", v, err)
	}
}

// The expected fingerprints were computed independently from the spec's
// definition (Python: little-endian sum mod 2^256, varint count, SHA-256).
func TestFingerprint(t *testing.T) {
	one := ID{1}
	var ff ID
	for i := range ff {
		ff[i] = 0xff
	}
	var many []ID
	for i := 1; i <= 200; i++ {
		var id ID
		for j := range id {
			id[j] = byte(i)
		}
		many = append(many, id)
	}
	cases := []struct {
		name string
		ids  []ID
		want string
	}{
		{"empty", nil, "7f9c9e31ac8256ca2f258583df262dbc"},
		{"one", []ID{one}, "2e255099d6d6bee307c8e7075acc78f9"},
		{"sum wraps mod 2^256", []ID{ff, one}, "58cc2f44d3a27866874701fbad573da9"},
		{"200 ids, two-byte count", many, "1a0e57bff587c6a07939268d1f38e9a2"},
	}
	for _, c := range cases {
		var acc Accumulator
		for _, id := range c.ids {
			acc.Add(id)
		}
		if got := acc.Fingerprint(uint64(len(c.ids))).String(); got != c.want {
			t.Errorf("%s: fingerprint %s, want %s", c.name, got, c.want)
		}
		// Summing halves separately and merging gives the same fingerprint.
		var a, b Accumulator
		for i, id := range c.ids {
			if i%2 == 0 {
				a.Add(id)
			} else {
				b.Add(id)
			}
		}
		a.Merge(b)
		if got := a.Fingerprint(uint64(len(c.ids))).String(); got != c.want {
			t.Errorf("%s: merged fingerprint %s, want %s", c.name, got, c.want)
		}
	}
}

func fpOf(b byte) Fingerprint {
	var f Fingerprint
	for i := range f {
		f[i] = b
	}
	return f
}

func idOf(b byte) ID {
	var id ID
	for i := range id {
		id[i] = b
	}
	return id
}

func TestMessageCodec(t *testing.T) {
	cases := []struct {
		name string
		hex  string
		msg  Message
	}{
		{"no ranges", "61", Message{}},
		{"empty id list to infinity", "61 00 00 02 00",
			Message{Ranges: []Range{{Upper: infinityBound, Mode: ModeIDList}}}},
		{"fingerprint then skip to infinity",
			"61 06 00 01 " + strings.Repeat("aa", 16) + " 00 00 00",
			Message{Ranges: []Range{
				{Upper: Bound{Timestamp: 5}, Mode: ModeFingerprint, Fingerprint: fpOf(0xaa)},
				{Upper: infinityBound, Mode: ModeSkip},
			}}},
		{"timestamps are deltas, prefixes disambiguate",
			"61 0b 00 00 01 01 ab 00 8100 02 cdef 00",
			Message{Ranges: []Range{
				{Upper: Bound{Timestamp: 10}, Mode: ModeSkip},
				{Upper: Bound{Timestamp: 10, ID: ID{0xab}, PrefixLen: 1}, Mode: ModeSkip},
				{Upper: Bound{Timestamp: 137, ID: ID{0xcd, 0xef}, PrefixLen: 2}, Mode: ModeSkip},
			}}},
		{"id list of one id, timestamp 0",
			"61 01 00 02 01 " + strings.Repeat("11", 32) + " 00 00 00",
			Message{Ranges: []Range{
				{Upper: Bound{Timestamp: 0}, Mode: ModeIDList, IDs: []ID{idOf(0x11)}},
				{Upper: infinityBound, Mode: ModeSkip},
			}}},
		{"largest finite timestamp",
			"61 81ffffffffffffffff7f 00 00",
			Message{Ranges: []Range{{Upper: Bound{Timestamp: Infinity - 1}, Mode: ModeSkip}}}},
		{"full 32-byte prefix",
			"61 02 20 " + strings.Repeat("22", 32) + " 00",
			Message{Ranges: []Range{{Upper: Bound{Timestamp: 1, ID: idOf(0x22), PrefixLen: 32}, Mode: ModeSkip}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wire := mustHex(t, c.hex)
			got, err := DecodeMessage(wire)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, c.msg) {
				t.Fatalf("decode = %+v, want %+v", got, c.msg)
			}
			enc, err := c.msg.MarshalBinary()
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(enc, wire) {
				t.Fatalf("encode = %x, want %x", enc, wire)
			}
		})
	}
}

func TestDecodeSaturatesAtInfinity(t *testing.T) {
	// After an infinity bound every later bound is infinity too; a delta
	// that would pass 2^64-1 saturates, as in the reference.
	m, err := DecodeMessage(mustHex(t, "61 00 00 00 05 00 00 81ffffffffffffffff7f 00 00"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range m.Ranges {
		if r.Upper.Timestamp != Infinity {
			t.Errorf("range %d timestamp %d, want infinity", i, r.Upper.Timestamp)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		hex  string
		want error
	}{
		{"empty", "", ErrMalformed},
		{"version below 0x60", "5f", ErrMalformed},
		{"version above 0x6f", "70", ErrMalformed},
		{"version 2", "62", ErrUnsupportedVersion},
		{"version 0", "60 00 00 00", ErrUnsupportedVersion},
		{"bound without prefix length", "61 00", ErrMalformed},
		{"bound without mode", "61 00 00", ErrMalformed},
		{"mode 3 (deprecated)", "61 00 00 03", ErrMalformed},
		{"mode 4", "61 00 00 04", ErrMalformed},
		{"mode 256 does not wrap to Skip", "61 00 00 8200", ErrMalformed},
		{"prefix longer than 32", "61 01 21 " + strings.Repeat("00", 33) + " 00", ErrMalformed},
		{"prefix truncated", "61 01 05 aabb", ErrMalformed},
		{"fingerprint truncated", "61 00 00 01 " + strings.Repeat("aa", 15), ErrMalformed},
		{"id list longer than message", "61 00 00 02 02 " + strings.Repeat("aa", 32), ErrMalformed},
		{"id list count overflows", "61 00 00 02 81ffffffffffffffff7f", ErrMalformed},
		{"timestamp varint overflows", "61 82808080808080808000 00 00", ErrMalformed},
		{"truncated timestamp varint", "61 81", ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeMessage(mustHex(t, c.hex))
			if !errors.Is(err, c.want) {
				t.Fatalf("error = %v, want %v", err, c.want)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	cases := []struct {
		name string
		msg  Message
	}{
		{"timestamps descend", Message{Ranges: []Range{
			{Upper: Bound{Timestamp: 5}, Mode: ModeSkip},
			{Upper: Bound{Timestamp: 4}, Mode: ModeSkip},
		}}},
		{"finite after infinity", Message{Ranges: []Range{
			{Upper: infinityBound, Mode: ModeSkip},
			{Upper: Bound{Timestamp: 4}, Mode: ModeSkip},
		}}},
		{"prefix length 33", Message{Ranges: []Range{{Upper: Bound{PrefixLen: 33}, Mode: ModeSkip}}}},
		{"negative prefix length", Message{Ranges: []Range{{Upper: Bound{PrefixLen: -1}, Mode: ModeSkip}}}},
		{"id bytes beyond prefix", Message{Ranges: []Range{{Upper: Bound{ID: ID{1, 2}, PrefixLen: 1}, Mode: ModeSkip}}}},
		{"unknown mode", Message{Ranges: []Range{{Upper: infinityBound, Mode: 3}}}},
		{"ids in a skip range", Message{Ranges: []Range{{Upper: infinityBound, Mode: ModeSkip, IDs: []ID{{}}}}}},
		{"fingerprint in an id list", Message{Ranges: []Range{{Upper: infinityBound, Mode: ModeIDList, Fingerprint: fpOf(1)}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.msg.MarshalBinary(); !errors.Is(err, ErrEncode) {
				t.Fatalf("error = %v, want ErrEncode", err)
			}
		})
	}
}

func TestUnmarshalBinary(t *testing.T) {
	var m Message
	if err := m.UnmarshalBinary(mustHex(t, "61 00 00 02 00")); err != nil || len(m.Ranges) != 1 {
		t.Fatalf("UnmarshalBinary: %+v, %v", m, err)
	}
	if err := m.UnmarshalBinary(nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("UnmarshalBinary(nil) error = %v", err)
	}
}
