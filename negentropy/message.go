package negentropy

import (
	"fmt"
)

// Mode says how a range's payload is to be read.
type Mode uint8

// The three modes of protocol version 1.
const (
	// ModeSkip: the sender needs nothing more for this range; no payload.
	ModeSkip Mode = 0
	// ModeFingerprint: the payload is the fingerprint of the sender's ids in
	// the range.
	ModeFingerprint Mode = 1
	// ModeIDList: the payload is every id the sender has in the range.
	ModeIDList Mode = 2
)

// String names the mode as the spec does.
func (m Mode) String() string {
	switch m {
	case ModeSkip:
		return "Skip"
	case ModeFingerprint:
		return "Fingerprint"
	case ModeIDList:
		return "IdList"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Range is one entry of a message: it runs from the previous range's upper
// bound (or the zero bound) to Upper, exclusive.
type Range struct {
	Upper Bound
	Mode  Mode
	// Fingerprint is the payload of a ModeFingerprint range, zero otherwise.
	Fingerprint Fingerprint
	// IDs is the payload of a ModeIDList range (nil when empty), nil
	// otherwise.
	IDs []ID
}

// Message is a decoded version-1 message: the version byte is implied. Its
// ranges have ascending upper bounds; a message whose last bound is not at the
// Infinity timestamp implicitly skips the rest of the universe.
type Message struct {
	Ranges []Range
}

// AppendBinary appends the encoded message (version byte first) to dst.
func (m Message) AppendBinary(dst []byte) ([]byte, error) {
	e := encoder{buf: append(dst, ProtocolVersion)}
	for i, r := range m.Ranges {
		if err := e.appendRange(r); err != nil {
			return dst, fmt.Errorf("range %d: %w", i, err)
		}
	}
	return e.buf, nil
}

// MarshalBinary encodes the message.
func (m Message) MarshalBinary() ([]byte, error) { return m.AppendBinary(nil) }

// UnmarshalBinary decodes b into m; see DecodeMessage.
func (m *Message) UnmarshalBinary(b []byte) error {
	d, err := DecodeMessage(b)
	if err != nil {
		return err
	}
	*m = d
	return nil
}

// encoder writes ranges one at a time, keeping the running timestamp that
// bounds are delta-encoded against. Copying an encoder value is a snapshot:
// restoring it drops whatever was appended since.
type encoder struct {
	buf  []byte
	last uint64
}

func newEncoder() encoder { return encoder{buf: []byte{ProtocolVersion}} }

func (e *encoder) len() int { return len(e.buf) }

func (e *encoder) appendBound(b Bound) error {
	if b.PrefixLen < 0 || b.PrefixLen > IDSize {
		return fmt.Errorf("%w: id prefix length %d", ErrEncode, b.PrefixLen)
	}
	for _, c := range b.ID[b.PrefixLen:] {
		if c != 0 {
			return fmt.Errorf("%w: bound id has bytes beyond its prefix length", ErrEncode)
		}
	}
	if b.Timestamp == Infinity {
		e.buf = appendVarint(e.buf, 0)
		e.last = Infinity
	} else {
		if b.Timestamp < e.last {
			return fmt.Errorf("%w: bound timestamp %d below previous %d", ErrEncode, b.Timestamp, e.last)
		}
		e.buf = appendVarint(e.buf, b.Timestamp-e.last+1)
		e.last = b.Timestamp
	}
	e.buf = appendVarint(e.buf, uint64(b.PrefixLen))
	e.buf = append(e.buf, b.ID[:b.PrefixLen]...)
	return nil
}

func (e *encoder) appendRange(r Range) error {
	switch r.Mode {
	case ModeSkip, ModeFingerprint, ModeIDList:
	default:
		return fmt.Errorf("%w: unknown mode %d", ErrEncode, r.Mode)
	}
	if r.Mode != ModeIDList && r.IDs != nil {
		return fmt.Errorf("%w: ids in a %v range", ErrEncode, r.Mode)
	}
	if r.Mode != ModeFingerprint && r.Fingerprint != (Fingerprint{}) {
		return fmt.Errorf("%w: fingerprint in a %v range", ErrEncode, r.Mode)
	}
	if err := e.appendBound(r.Upper); err != nil {
		return err
	}
	e.buf = append(e.buf, byte(r.Mode))
	switch r.Mode {
	case ModeFingerprint:
		e.buf = append(e.buf, r.Fingerprint[:]...)
	case ModeIDList:
		e.buf = appendVarint(e.buf, uint64(len(r.IDs)))
		for _, id := range r.IDs {
			e.buf = append(e.buf, id[:]...)
		}
	}
	return nil
}

// DecodeMessage decodes a version-1 message. A version byte in 0x60..0x6f
// other than 0x61 gives an error wrapping ErrUnsupportedVersion; anything
// else that is not well formed gives one wrapping ErrMalformed. Timestamps
// that would pass Infinity saturate to Infinity, as the reference does.
func DecodeMessage(b []byte) (Message, error) {
	if len(b) == 0 {
		return Message{}, fmt.Errorf("%w: empty message", ErrMalformed)
	}
	v := b[0]
	if v < 0x60 || v > 0x6f {
		return Message{}, fmt.Errorf("%w: invalid protocol version byte 0x%02x", ErrMalformed, v)
	}
	if v != ProtocolVersion {
		return Message{}, fmt.Errorf("%w: version %d (byte 0x%02x)", ErrUnsupportedVersion, v-0x60, v)
	}
	d := decoder{b: b[1:]}
	var m Message
	for len(d.b) > 0 {
		r, err := d.readRange()
		if err != nil {
			return Message{}, fmt.Errorf("range %d at byte %d: %w", len(m.Ranges), len(b)-len(d.b), err)
		}
		m.Ranges = append(m.Ranges, r)
	}
	return m, nil
}

type decoder struct {
	b    []byte
	last uint64
}

func (d *decoder) varint() (uint64, error) {
	v, n, err := readVarint(d.b)
	if err != nil {
		return 0, err
	}
	d.b = d.b[n:]
	return v, nil
}

func (d *decoder) bytes(n int) ([]byte, error) {
	if n > len(d.b) {
		return nil, fmt.Errorf("%w: need %d bytes, %d left", ErrMalformed, n, len(d.b))
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out, nil
}

func (d *decoder) readBound() (Bound, error) {
	enc, err := d.varint()
	if err != nil {
		return Bound{}, err
	}
	ts := Infinity
	if enc != 0 {
		ts = d.last + (enc - 1)
		if ts < d.last {
			ts = Infinity
		}
	}
	d.last = ts
	plen, err := d.varint()
	if err != nil {
		return Bound{}, err
	}
	if plen > IDSize {
		return Bound{}, fmt.Errorf("%w: id prefix length %d", ErrMalformed, plen)
	}
	p, err := d.bytes(int(plen))
	if err != nil {
		return Bound{}, err
	}
	b := Bound{Timestamp: ts, PrefixLen: int(plen)}
	copy(b.ID[:], p)
	return b, nil
}

func (d *decoder) readRange() (Range, error) {
	var r Range
	var err error
	if r.Upper, err = d.readBound(); err != nil {
		return Range{}, err
	}
	mode, err := d.varint()
	if err != nil {
		return Range{}, err
	}
	if mode > uint64(ModeIDList) {
		return Range{}, fmt.Errorf("%w: unknown mode %d", ErrMalformed, mode)
	}
	r.Mode = Mode(mode)
	switch r.Mode {
	case ModeSkip:
	case ModeFingerprint:
		fp, err := d.bytes(FingerprintSize)
		if err != nil {
			return Range{}, err
		}
		copy(r.Fingerprint[:], fp)
	case ModeIDList:
		n, err := d.varint()
		if err != nil {
			return Range{}, err
		}
		if n > uint64(len(d.b)/IDSize) {
			return Range{}, fmt.Errorf("%w: id list of %d ids with %d bytes left", ErrMalformed, n, len(d.b))
		}
		if n > 0 {
			r.IDs = make([]ID, n)
			for i := range r.IDs {
				copy(r.IDs[i][:], d.b[:IDSize])
				d.b = d.b[IDSize:]
			}
		}
	}
	return r, nil
}
