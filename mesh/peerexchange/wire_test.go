package peerexchange

import (
	"bufio"
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestMessageLimits(t *testing.T) {
	sum := func(b byte) descriptorSum { return descriptorSum{b} }
	full := message{
		descriptors: [][]byte{[]byte("abc"), []byte("de")},
		offer:       []descriptorSum{sum(1), sum(2)},
		want:        []descriptorSum{sum(3)},
	}
	ok := appendMessage(nil, full)
	empty := message{descriptors: [][]byte{}, offer: []descriptorSum{}, want: []descriptorSum{}}
	tests := []struct {
		name     string
		data     []byte
		maxCount int
		maxBytes int
		want     message
		wantErr  bool
	}{
		{"all three lists", ok, 2, 3, full, false},
		{"empty lists", appendMessage(nil, message{}), 2, 3, empty, false},
		{"offer only", appendMessage(nil, message{offer: full.offer}), 2, 3,
			message{descriptors: [][]byte{}, offer: full.offer, want: []descriptorSum{}}, false},
		{"too many descriptors", appendMessage(nil, message{descriptors: full.descriptors}), 1, 3, message{}, true},
		{"too many offered", appendMessage(nil, message{offer: full.offer}), 1, 3, message{}, true},
		{"too many wanted", appendMessage(nil, message{want: full.offer}), 1, 3, message{}, true},
		{"too big", ok, 2, 2, message{}, true},
		{"empty descriptor", []byte{1, 0, 0, 0}, 2, 3, message{}, true},
		{"truncated sum", ok[:len(ok)-1], 2, 3, message{}, true},
		{"no wanted list", appendMessage(nil, message{})[:2], 2, 3, message{}, true},
		{"no count", nil, 2, 3, message{}, true},
		{"overlong varint", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 2, 3, message{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readMessage(bufio.NewReader(bytes.NewReader(tc.data)), tc.maxCount, tc.maxBytes)
			if tc.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
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

func FuzzMessage(f *testing.F) {
	f.Add(appendMessage(nil, message{descriptors: [][]byte{[]byte("eyJhbGciOiJFZERTQSJ9.e30.c2ln")}}))
	f.Add(appendMessage(nil, message{offer: []descriptorSum{{1}}, want: []descriptorSum{{2}, {3}}}))
	f.Add(appendMessage(nil, message{}))
	f.Add([]byte{5, 1, 'a'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readMessage(bufio.NewReader(bytes.NewReader(data)), 8, 64)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(got.descriptors) > 8 || len(got.offer) > 8 || len(got.want) > 8 {
			t.Fatalf("%d descriptors, %d offered, %d wanted passed a limit of 8", len(got.descriptors), len(got.offer), len(got.want))
		}
		again := appendMessage(nil, got)
		if !bytes.HasPrefix(data, again) {
			t.Fatalf("re-encoding %+v gives %x, not a prefix of the input %x", got, again, data)
		}
	})
}
