package negentropy

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/bits"
)

// Sizes and reserved values fixed by Negentropy Protocol V1.
const (
	// ProtocolVersion is the first byte of every version-1 message.
	ProtocolVersion byte = 0x61
	// IDSize is the length of an item id in bytes.
	IDSize = 32
	// FingerprintSize is the length of a range fingerprint in bytes.
	FingerprintSize = 16
	// Infinity is the timestamp reserved for "after every item"; no item may
	// carry it.
	Infinity uint64 = math.MaxUint64
)

// ID is a 32-byte item id (a Nostr event id).
type ID [IDSize]byte

// String returns the id in lowercase hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Item is one record of a set: its timestamp (created_at) and id. Sets are
// ordered by timestamp, then by id byte-wise.
type Item struct {
	Timestamp uint64
	ID        ID
}

// Compare orders items by (timestamp, id); it returns -1, 0 or +1.
func (a Item) Compare(b Item) int {
	if c := cmp.Compare(a.Timestamp, b.Timestamp); c != 0 {
		return c
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// Bound separates ranges: a timestamp and the first PrefixLen bytes of an
// id, the remaining bytes being zero. An item is below a bound when its
// (timestamp, id) sorts before (Timestamp, ID). The bound with timestamp
// Infinity lies after every item.
type Bound struct {
	Timestamp uint64
	// ID holds the prefix; bytes at and after PrefixLen must be zero.
	ID ID
	// PrefixLen is how many bytes of ID are sent on the wire (0..32).
	PrefixLen int
}

// infinityBound is the upper bound of the whole universe (Bound{Timestamp:
// Infinity}).
var infinityBound = Bound{Timestamp: Infinity}

// boundOf returns the bound that sits exactly at item (its full id).
func boundOf(it Item) Bound {
	return Bound{Timestamp: it.Timestamp, ID: it.ID, PrefixLen: IDSize}
}

// CompareItem orders item against b: -1 when item is below b (inside a range
// whose upper bound is b), 0 when equal, +1 when above.
func (b Bound) CompareItem(it Item) int {
	if c := cmp.Compare(it.Timestamp, b.Timestamp); c != 0 {
		return c
	}
	key := b.key()
	return bytes.Compare(it.ID[:], key[:])
}

// key is the bound's id with everything past the prefix zeroed.
func (b Bound) key() ID {
	n := min(max(b.PrefixLen, 0), IDSize)
	var k ID
	copy(k[:n], b.ID[:n])
	return k
}

// Compare orders two bounds by timestamp, then by zero-padded id prefix.
func (b Bound) Compare(o Bound) int {
	if c := cmp.Compare(b.Timestamp, o.Timestamp); c != 0 {
		return c
	}
	bk, ok := b.key(), o.key()
	return bytes.Compare(bk[:], ok[:])
}

// minimalBound is the shortest bound that separates prev from next (prev <
// next): above prev and at or below next, so that next opens the range.
func minimalBound(prev, next Item) Bound {
	if prev.Timestamp != next.Timestamp {
		return Bound{Timestamp: next.Timestamp}
	}
	shared := 0
	for shared < IDSize && prev.ID[shared] == next.ID[shared] {
		shared++
	}
	b := Bound{Timestamp: next.Timestamp, PrefixLen: min(shared+1, IDSize)}
	copy(b.ID[:b.PrefixLen], next.ID[:b.PrefixLen])
	return b
}

// Fingerprint is the 16-byte digest of a range.
type Fingerprint [FingerprintSize]byte

// String returns the fingerprint in lowercase hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// Accumulator is the running sum, mod 2^256, of ids read as little-endian
// 256-bit integers. A store that keeps sums per page or per tree node can
// combine them with Merge instead of re-reading every id. The zero value is
// an empty sum.
type Accumulator struct {
	limbs [4]uint64 // least significant first
}

// Add adds one id to the sum.
func (a *Accumulator) Add(id ID) {
	var carry uint64
	for i := range a.limbs {
		a.limbs[i], carry = bits.Add64(a.limbs[i], binary.LittleEndian.Uint64(id[8*i:]), carry)
	}
}

// Merge adds another accumulator's sum to this one.
func (a *Accumulator) Merge(o Accumulator) {
	var carry uint64
	for i := range a.limbs {
		a.limbs[i], carry = bits.Add64(a.limbs[i], o.limbs[i], carry)
	}
}

// Fingerprint returns the first 16 bytes of SHA-256(sum ‖ varint(count)),
// where count is the number of ids added.
func (a *Accumulator) Fingerprint(count uint64) Fingerprint {
	buf := make([]byte, IDSize, IDSize+10)
	for i, l := range a.limbs {
		binary.LittleEndian.PutUint64(buf[8*i:], l)
	}
	buf = appendVarint(buf, count)
	sum := sha256.Sum256(buf)
	var f Fingerprint
	copy(f[:], sum[:FingerprintSize])
	return f
}
