package store

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"

	"fleetmesh.org/fleetmesh/nostr"
)

// Key prefixes; see the package doc for the layout.
const (
	pEvent      = 'E'
	pID         = 'I'
	pCreated    = 'C'
	pKind       = 'K'
	pAuthor     = 'A'
	pAuthorKind = 'P'
	pTag        = 'T'
	pReplace    = 'R'
	pDeletedID  = 'D'
	pDeletedAdr = 'F'
	pExpiry     = 'X'
)

func u64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }
func u16(dst []byte, v int) []byte    { return binary.BigEndian.AppendUint16(dst, uint16(v)) }

// hash64 shortens a tag value or d tag to a fixed width key part. A
// collision only adds a candidate; every candidate is matched in full.
func hash64(s string) uint64 { return xxhash.Sum64String(s) }

func eventKey(serial uint64) []byte { return u64([]byte{pEvent}, serial) }
func idKey(id [32]byte) []byte      { return append([]byte{pID}, id[:]...) }

// deletedIDKey is the NIP-09 tombstone of id left by a deletion request
// of pubkey by. Each deleter has its own, so that one pubkey's request
// never lifts or replaces another's: an event is refused iff its author's
// is there.
func deletedIDKey(id, by [32]byte) []byte {
	k := make([]byte, 0, 1+len(id)+len(by))
	return append(append(append(k, pDeletedID), id[:]...), by[:]...)
}

// addressKey names a replaceable (d = "") or addressable event's slot.
func addressKey(prefix byte, pubkey [32]byte, kind int, d string) []byte {
	k := append([]byte{prefix}, pubkey[:]...)
	k = u16(k, kind)
	return u64(k, hash64(d))
}

// slotOf returns the replacement slot of an event, or nil for events that
// are never replaced.
func slotOf(prefix byte, e *nostr.Event) []byte {
	switch nostr.ClassOf(e.Kind) {
	case nostr.Replaceable:
		return addressKey(prefix, e.PubKey, e.Kind, "")
	case nostr.Addressable:
		return addressKey(prefix, e.PubKey, e.Kind, e.DTag())
	}
	return nil
}

// indexKeys lists every secondary index key of an event.
func indexKeys(e *nostr.Event, serial uint64) [][]byte {
	suffix := u64(u64(nil, uint64(e.CreatedAt)), serial)
	keys := make([][]byte, 0, 4+len(e.Tags))
	keys = append(keys,
		append([]byte{pCreated}, suffix...),
		append(u16([]byte{pKind}, e.Kind), suffix...),
		append(append([]byte{pAuthor}, e.PubKey[:]...), suffix...),
		append(u16(append([]byte{pAuthorKind}, e.PubKey[:]...), e.Kind), suffix...),
	)
	seen := make(map[uint64]struct{}, len(e.Tags))
	for _, t := range e.Tags {
		if len(t) < 2 || len(t[0]) != 1 {
			continue
		}
		h := hash64(t[1])
		dedup := h ^ uint64(t[0][0])<<56
		if _, dup := seen[dedup]; dup {
			continue
		}
		seen[dedup] = struct{}{}
		keys = append(keys, append(tagPrefix(t[0][0], t[1]), suffix...))
	}
	if exp, ok := e.Expiration(); ok {
		keys = append(keys, u64(u64([]byte{pExpiry}, uint64(exp)), serial))
	}
	return keys
}

func tagPrefix(letter byte, value string) []byte {
	return u64([]byte{pTag, letter}, hash64(value))
}
