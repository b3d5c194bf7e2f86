package negentropy

import "fmt"

// maxVarintLen is the longest base-128 encoding of a uint64.
const maxVarintLen = 10

// appendVarint appends v as negentropy's varint: base-128 digits, most
// significant first, high bit set on every byte but the last. (This is not
// encoding/binary's little-endian uvarint.)
func appendVarint(dst []byte, v uint64) []byte {
	var tmp [maxVarintLen]byte
	i := len(tmp) - 1
	tmp[i] = byte(v & 0x7f)
	for v >>= 7; v != 0; v >>= 7 {
		i--
		tmp[i] = byte(v&0x7f) | 0x80
	}
	return append(dst, tmp[i:]...)
}

// varintLen is the encoded length of v.
func varintLen(v uint64) int {
	n := 1
	for v >>= 7; v != 0; v >>= 7 {
		n++
	}
	return n
}

// readVarint decodes a varint from the front of b, returning the value and
// the bytes it used. Non-minimal encodings (leading 0x80 digits) are
// accepted, as the reference implementations accept them; values that do not
// fit 64 bits are not.
func readVarint(b []byte) (uint64, int, error) {
	var v uint64
	for i, c := range b {
		if v > (1<<64-1)>>7 {
			return 0, 0, fmt.Errorf("%w: varint overflows 64 bits", ErrMalformed)
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: truncated varint", ErrMalformed)
}
