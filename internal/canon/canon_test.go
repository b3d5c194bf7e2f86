package canon

import (
	"bytes"
	"testing"
)

type rec struct {
	A string `cbor:"a"`
	N uint64 `cbor:"n"`
	B []byte `cbor:"b"`
}

func TestRoundTripAndStrictness(t *testing.T) {
	b, err := Marshal(rec{A: "x", N: 300, B: []byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	var r rec
	if err := Unmarshal(b, &r); err != nil || r.N != 300 {
		t.Fatalf("%v %+v", err, r)
	}
	for name, in := range map[string][]byte{
		"long integer":  bytes.Replace(b, []byte{0x19, 0x01, 0x2c}, []byte{0x1a, 0, 0, 0x01, 0x2c}, 1),
		"duplicate key": {0xa2, 0x61, 'a', 0x61, 'x', 0x61, 'a', 0x61, 'y'},
		"unknown field": {0xa1, 0x61, 'z', 0x01},
		"indefinite":    {0xbf, 0x61, 'a', 0x61, 'x', 0xff},
		"tag":           {0xc0, 0x61, 'x'},
	} {
		if err := Unmarshal(in, &r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	b, _ := Marshal(rec{A: "x", N: 1})
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var r rec
		if Unmarshal(data, &r) != nil {
			return
		}
		again, err := Marshal(r)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatal("accepted input that is not canonical")
		}
	})
}
