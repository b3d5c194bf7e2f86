package store

import (
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strconv"

	"fleetmesh.org/fleetmesh/nostr"
)

// Raw is one event a query found, read in place from its stored record
// (codec.go) without decoding it into a nostr.Event: a query matches
// candidates and a relay writes their JSON straight from the record. It is
// valid only during the callback that receives it; Event makes a copy that
// outlives it.
type Raw struct {
	rec       []byte // the whole record; id, pubkey and sig are its first 128 bytes
	createdAt int64
	kind      int
	tags      int // offset of the first tag (after the tag count)
	ntags     int
	content   int // offset of the content's length
}

// view checks a record's structure and fills s with its offsets. It walks
// the record once; nothing is copied.
func (s *Raw) view(b []byte) error {
	if len(b) < 128 {
		return errCorrupt
	}
	i := 128
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return v, true
	}
	ts, ok1 := next()
	kind, ok2 := next()
	ntags, ok3 := next()
	if !ok1 || !ok2 || !ok3 || ntags > uint64(len(b)) {
		return errCorrupt
	}
	*s = Raw{rec: b, createdAt: int64(ts), kind: int(kind), tags: i, ntags: int(ntags)}
	for range ntags {
		nitems, ok := next()
		if !ok || nitems > uint64(len(b)) {
			return errCorrupt
		}
		for range nitems {
			n, ok := next()
			if !ok || n > uint64(len(b)-i) {
				return errCorrupt
			}
			i += int(n)
		}
	}
	s.content = i
	n, ok := next()
	if !ok || n != uint64(len(b)-i) {
		return errCorrupt
	}
	return nil
}

// ID is the event's id.
func (s *Raw) ID() (id [32]byte) { copy(id[:], s.rec[:32]); return id }

// PubKey is the event's author.
func (s *Raw) PubKey() (pk [32]byte) { copy(pk[:], s.rec[32:64]); return pk }

// CreatedAt is the event's created_at.
func (s *Raw) CreatedAt() int64 { return s.createdAt }

// Kind is the event's kind.
func (s *Raw) Kind() int { return s.kind }

// eachTag calls fn with each tag's name and first value (empty if the tag
// has none) until fn returns false. The strings share the record: fn must
// not keep them.
func (s *Raw) eachTag(fn func(name, value []byte, items int) bool) {
	b, i := s.rec, s.tags
	next := func() int {
		v, n := binary.Uvarint(b[i:])
		i += n
		return int(v)
	}
	for range s.ntags {
		items := next()
		var name, value []byte
		for j := range items {
			n := next()
			switch j {
			case 0:
				name = b[i : i+n]
			case 1:
				value = b[i : i+n]
			}
			i += n
		}
		if !fn(name, value, items) {
			return
		}
	}
}

// tagValue is the first value of the first tag called name, as
// nostr.Tags.Value finds it.
func (s *Raw) tagValue(name string) (string, bool) {
	var v []byte
	found := false
	s.eachTag(func(n, value []byte, items int) bool {
		if string(n) == name {
			found = items > 1
			v = value
			return false
		}
		return true
	})
	return string(v), found
}

// expiration is the record's NIP-40 expiration, read as
// nostr.Event.Expiration reads it.
func (s *Raw) expiration() (int64, bool) {
	v, ok := s.tagValue("expiration")
	if !ok || v == "" {
		return 0, false
	}
	var ts int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' || i >= 18 {
			return 0, false
		}
		ts = ts*10 + int64(c-'0')
	}
	return ts, true
}

// hasTagValue reports whether a tag called name has one of values as its
// first value (nostr's rule for a filter's #x condition).
func (s *Raw) hasTagValue(name string, values []string) bool {
	found := false
	s.eachTag(func(n, value []byte, items int) bool {
		if items >= 2 && string(n) == name && slices.Contains(values, string(value)) {
			found = true
			return false
		}
		return true
	})
	return found
}

// matches is nostr.Filter.Matches on the record.
func (s *Raw) matches(f *nostr.Filter) bool {
	if f.IDs != nil && !slices.ContainsFunc(f.IDs, func(id [32]byte) bool { return string(id[:]) == string(s.rec[:32]) }) {
		return false
	}
	if f.Authors != nil && !slices.ContainsFunc(f.Authors, func(pk [32]byte) bool { return string(pk[:]) == string(s.rec[32:64]) }) {
		return false
	}
	if f.Kinds != nil && !slices.Contains(f.Kinds, s.kind) {
		return false
	}
	if f.Since != 0 && s.createdAt < f.Since {
		return false
	}
	if f.HasUntil && s.createdAt > f.Until {
		return false
	}
	for name, values := range f.Tags {
		if !s.hasTagValue(name, values) {
			return false
		}
	}
	return f.Search == ""
}

// AppendJSON appends the event's NIP-01 JSON object to dst, exactly as
// nostr.Event.AppendJSON writes the decoded event, straight from the record.
func (s *Raw) AppendJSON(dst []byte) []byte {
	b := s.rec
	dst = append(dst, `{"id":"`...)
	dst = hex.AppendEncode(dst, b[:32])
	dst = append(dst, `","pubkey":"`...)
	dst = hex.AppendEncode(dst, b[32:64])
	dst = append(dst, `","created_at":`...)
	dst = strconv.AppendInt(dst, s.createdAt, 10)
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, int64(s.kind), 10)
	dst = append(dst, `,"tags":[`...)
	i := s.tags
	next := func() int {
		v, n := binary.Uvarint(b[i:])
		i += n
		return int(v)
	}
	for t := range s.ntags {
		if t > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j := range next() {
			if j > 0 {
				dst = append(dst, ',')
			}
			n := next()
			dst = nostr.AppendStringBytes(dst, b[i:i+n])
			i += n
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `],"content":`...)
	i = s.content
	n := next()
	dst = nostr.AppendStringBytes(dst, b[i:i+n])
	dst = append(dst, `,"sig":"`...)
	dst = hex.AppendEncode(dst, b[64:128])
	return append(dst, `"}`...)
}

// Event decodes the record into a new event that outlives the callback.
func (s *Raw) Event() (*nostr.Event, error) {
	ev := new(nostr.Event)
	if err := decodeEvent(s.rec, ev); err != nil {
		return nil, err
	}
	return ev, nil
}
