package store

import (
	"encoding/binary"
	"errors"

	"fleetmesh.org/fleetmesh/nostr"
)

// The stored form of an event is binary rather than JSON so that a query
// can decode and match thousands of candidates cheaply:
//
//	id[32] pubkey[32] sig[64] uvarint(created_at) uvarint(kind)
//	uvarint(ntags) { uvarint(nitems) { uvarint(len) bytes } }
//	uvarint(len(content)) content

var errCorrupt = errors.New("store: corrupt event record")

func encodeEvent(dst []byte, e *nostr.Event) []byte {
	dst = append(dst, e.ID[:]...)
	dst = append(dst, e.PubKey[:]...)
	dst = append(dst, e.Sig[:]...)
	dst = binary.AppendUvarint(dst, uint64(e.CreatedAt))
	dst = binary.AppendUvarint(dst, uint64(e.Kind))
	dst = binary.AppendUvarint(dst, uint64(len(e.Tags)))
	for _, t := range e.Tags {
		dst = binary.AppendUvarint(dst, uint64(len(t)))
		for _, s := range t {
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Content)))
	return append(dst, e.Content...)
}

func decodeEvent(b []byte, e *nostr.Event) error {
	if len(b) < 128 {
		return errCorrupt
	}
	copy(e.ID[:], b[0:32])
	copy(e.PubKey[:], b[32:64])
	copy(e.Sig[:], b[64:128])
	b = b[128:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := next()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	ts, ok1 := next()
	kind, ok2 := next()
	ntags, ok3 := next()
	if !ok1 || !ok2 || !ok3 || ntags > uint64(len(b)) {
		return errCorrupt
	}
	e.CreatedAt, e.Kind = int64(ts), int(kind)
	e.Tags = make(nostr.Tags, ntags)
	for i := range e.Tags {
		nitems, ok := next()
		if !ok || nitems > uint64(len(b)) {
			return errCorrupt
		}
		tag := make([]string, nitems)
		for j := range tag {
			if tag[j], ok = str(); !ok {
				return errCorrupt
			}
		}
		e.Tags[i] = tag
	}
	var ok bool
	if e.Content, ok = str(); !ok || len(b) != 0 {
		return errCorrupt
	}
	return nil
}
