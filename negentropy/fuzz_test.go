package negentropy

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// codecSeeds are wire messages, good and bad, that seed the fuzz targets.
var codecSeeds = []string{
	"",
	"61",
	"62",
	"5f00",
	"61 00 00 02 00",
	"61 06 00 01 " + strings.Repeat("aa", 16) + " 00 00 00",
	"61 0b 00 00 01 01 ab 00 8100 02 cdef 00",
	"61 01 00 02 01 " + strings.Repeat("11", 32) + " 00 00 00",
	"61 81ffffffffffffffff7f 00 00",
	"61 00 00 00 05 00 00 81ffffffffffffffff7f 00 00",
	"61 00 00 8200",
	"61 00 00 02 81ffffffffffffffff7f",
	"61 01 21 " + strings.Repeat("00", 33) + " 00",
}

// FuzzDecodeMessage: decoding never panics, and whatever decodes encodes
// again to bytes that decode to the same message (and encode identically).
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range codecSeeds {
		f.Add(mustHex(f, s))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		m, err := DecodeMessage(wire)
		if err != nil {
			return
		}
		enc, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded message does not encode: %v (%+v)", err, m)
		}
		m2, err := DecodeMessage(enc)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v (%x)", err, enc)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, m2)
		}
		enc2, err := m2.MarshalBinary()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %x vs %x (%v)", enc, enc2, err)
		}
	})
}

// FuzzReconcile feeds arbitrary bytes to both roles over a small set: they
// must answer with an error or with a message that decodes, never panic.
func FuzzReconcile(f *testing.F) {
	for _, s := range codecSeeds {
		f.Add(mustHex(f, s))
	}
	var items []Item
	for i := range 100 {
		items = append(items, Item{Timestamp: uint64(i / 3), ID: idOf(byte(i))})
	}
	store, err := NewVector(items)
	if err != nil {
		f.Fatal(err)
	}
	init, err := NewInitiator(store, Config{})
	if err != nil {
		f.Fatal(err)
	}
	first, err := init.Initiate()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(first)
	f.Fuzz(func(t *testing.T, wire []byte) {
		resp, err := NewResponder(store, Config{FrameSizeLimit: MinFrameSizeLimit})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := resp.Reconcile(wire); err == nil {
			if _, err := DecodeMessage(out); err != nil {
				t.Fatalf("responder reply does not decode: %v", err)
			}
			if len(out) > MinFrameSizeLimit {
				t.Fatalf("responder reply of %d bytes exceeds the frame limit", len(out))
			}
		}
		in, err := NewInitiator(store, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Initiate(); err != nil {
			t.Fatal(err)
		}
		if st, err := in.Reconcile(wire); err == nil && st.Next != nil {
			if _, err := DecodeMessage(st.Next); err != nil {
				t.Fatalf("initiator reply does not decode: %v", err)
			}
		}
	})
}
