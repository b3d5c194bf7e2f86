package relay

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// FrameType is the first field of every relay frame: a QUIC variable-length
// integer (RFC 9000 §16).
type FrameType uint32

// The frame types of iroh's relay protocol (v1 and v2).
const (
	FrameServerChallenge       FrameType = 0
	FrameClientAuth            FrameType = 1
	FrameServerConfirmsAuth    FrameType = 2
	FrameServerDeniesAuth      FrameType = 3
	FrameClientToRelayDatagram FrameType = 4
	FrameClientToRelayBatch    FrameType = 5
	FrameRelayToClientDatagram FrameType = 6
	FrameRelayToClientBatch    FrameType = 7
	FrameEndpointGone          FrameType = 8
	FramePing                  FrameType = 9
	FramePong                  FrameType = 10
	// FrameHealth is v1 only: a UTF-8 problem text.
	FrameHealth     FrameType = 11
	FrameRestarting FrameType = 12
	// FrameStatus is v2 only: one status byte.
	FrameStatus FrameType = 13
)

// MaxPacketSize bounds a frame's payload after its type, as iroh does.
const MaxPacketSize = 64 * 1024

// KeyLen is the length of an EndpointId (an Ed25519 public key).
const KeyLen = 32

// Status values of a FrameStatus frame.
const (
	StatusHealthy                 byte = 0
	StatusSameEndpointIDConnected byte = 1
)

// Errors of the decoders.
var (
	ErrShort     = errors.New("relay frame: too few bytes")
	ErrTooLarge  = fmt.Errorf("relay frame: payload larger than %d bytes", MaxPacketSize)
	ErrFrameType = errors.New("relay frame: unexpected frame type")
	ErrEncoding  = errors.New("relay frame: invalid encoding")
)

// ReadFrameType splits a frame into its type and payload.
func ReadFrameType(b []byte) (FrameType, []byte, error) {
	v, n, err := readQUICVarint(b)
	if err != nil {
		return 0, nil, err
	}
	if v > uint64(FrameStatus) {
		return 0, nil, fmt.Errorf("%w: %d is not a frame type", ErrFrameType, v)
	}
	return FrameType(v), b[n:], nil
}

// readQUICVarint decodes a QUIC variable-length integer: the top two bits
// of the first byte give its length (1, 2, 4 or 8 bytes).
func readQUICVarint(b []byte) (uint64, int, error) {
	if len(b) == 0 {
		return 0, 0, ErrShort
	}
	n := 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0, ErrShort
	}
	v := uint64(b[0] & 0x3f)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n, nil
}

// appendFrameType appends t as a QUIC varint; every frame type fits one byte.
func appendFrameType(b []byte, t FrameType) []byte { return append(b, byte(t)) }

// ClientFrame is one frame a client sends after the handshake.
type ClientFrame struct {
	Type FrameType
	// Dst, ECN, SegmentSize and Contents are those of a datagram frame.
	// SegmentSize is nonzero only for a batch: Contents is then
	// datagrams of SegmentSize bytes each (the last may be shorter).
	Dst         [KeyLen]byte
	ECN         byte
	SegmentSize uint16
	Contents    []byte
	// Data is a Ping's or Pong's 8 bytes.
	Data [8]byte
}

// DecodeClientFrame decodes a frame a client sends once authenticated:
// datagrams (single or batch), Ping or Pong. Contents alias b.
func DecodeClientFrame(b []byte) (ClientFrame, error) {
	t, p, err := ReadFrameType(b)
	if err != nil {
		return ClientFrame{}, err
	}
	if len(p) > MaxPacketSize {
		return ClientFrame{}, ErrTooLarge
	}
	f := ClientFrame{Type: t}
	switch t {
	case FrameClientToRelayDatagram, FrameClientToRelayBatch:
		if err := decodeDatagrams(p, t == FrameClientToRelayBatch, &f.Dst, &f.ECN, &f.SegmentSize, &f.Contents); err != nil {
			return ClientFrame{}, err
		}
	case FramePing, FramePong:
		if len(p) != 8 {
			return ClientFrame{}, fmt.Errorf("%w: ping/pong payload is %d bytes, want 8", ErrEncoding, len(p))
		}
		copy(f.Data[:], p)
	default:
		return ClientFrame{}, fmt.Errorf("%w: %d from a client", ErrFrameType, t)
	}
	return f, nil
}

func decodeDatagrams(p []byte, batch bool, key *[KeyLen]byte, ecn *byte, seg *uint16, contents *[]byte) error {
	min := KeyLen + 1
	if batch {
		min += 2
	}
	if len(p) < min {
		return ErrShort
	}
	copy(key[:], p[:KeyLen])
	*ecn = p[KeyLen] & 0x03
	p = p[KeyLen+1:]
	if batch {
		*seg = uint16(p[0])<<8 | uint16(p[1])
		p = p[2:]
	}
	*contents = p
	return nil
}

// AppendClientDatagram appends a client's datagram frame to dst (seg 0: a
// single datagram).
func AppendClientDatagram(b []byte, dst [KeyLen]byte, ecn byte, seg uint16, contents []byte) []byte {
	return appendDatagrams(b, FrameClientToRelayDatagram, FrameClientToRelayBatch, dst, ecn, seg, contents)
}

// AppendRelayDatagram appends the relay's datagram frame from src.
func AppendRelayDatagram(b []byte, src [KeyLen]byte, ecn byte, seg uint16, contents []byte) []byte {
	return appendDatagrams(b, FrameRelayToClientDatagram, FrameRelayToClientBatch, src, ecn, seg, contents)
}

func appendDatagrams(b []byte, single, batch FrameType, key [KeyLen]byte, ecn byte, seg uint16, contents []byte) []byte {
	t := single
	if seg != 0 {
		t = batch
	}
	b = appendFrameType(b, t)
	b = append(b, key[:]...)
	b = append(b, ecn)
	if seg != 0 {
		b = append(b, byte(seg>>8), byte(seg))
	}
	return append(b, contents...)
}

// AppendPing appends a Ping (or, with FramePong, a Pong) frame.
func AppendPing(b []byte, t FrameType, data [8]byte) []byte {
	return append(appendFrameType(b, t), data[:]...)
}

// AppendEndpointGone appends the frame telling a client that an endpoint it
// sent to has disconnected.
func AppendEndpointGone(b []byte, id [KeyLen]byte) []byte {
	return append(appendFrameType(b, FrameEndpointGone), id[:]...)
}

// AppendStatus appends a v2 Status frame.
func AppendStatus(b []byte, status byte) []byte {
	return append(appendFrameType(b, FrameStatus), status)
}

// AppendHealth appends a v1 Health frame with a problem text.
func AppendHealth(b []byte, problem string) []byte {
	return append(appendFrameType(b, FrameHealth), problem...)
}

// AppendRestarting appends a Restarting frame: reconnect after
// reconnectMs, keep trying for tryMs.
func AppendRestarting(b []byte, reconnectMs, tryMs uint32) []byte {
	b = appendFrameType(b, FrameRestarting)
	return append(b, byte(reconnectMs>>24), byte(reconnectMs>>16), byte(reconnectMs>>8), byte(reconnectMs),
		byte(tryMs>>24), byte(tryMs>>16), byte(tryMs>>8), byte(tryMs))
}

// ServerFrame is one frame the relay sends, as a client decodes it.
type ServerFrame struct {
	Type FrameType
	// Src, ECN, SegmentSize, Contents: a datagram frame's.
	Src         [KeyLen]byte
	ECN         byte
	SegmentSize uint16
	Contents    []byte
	// Data: a Ping's or Pong's bytes.
	Data [8]byte
	// Gone: an EndpointGone frame's endpoint.
	Gone [KeyLen]byte
	// Status: a Status frame's byte.
	Status byte
	// Problem: a Health frame's text, or a ServerDeniesAuth reason.
	Problem string
	// Challenge: a ServerChallenge's 16 bytes.
	Challenge [16]byte
	// ReconnectMs, TryMs: a Restarting frame's.
	ReconnectMs, TryMs uint32
}

// DecodeServerFrame decodes any frame the relay sends, handshake frames
// included. Contents alias b.
func DecodeServerFrame(b []byte) (ServerFrame, error) {
	t, p, err := ReadFrameType(b)
	if err != nil {
		return ServerFrame{}, err
	}
	if len(p) > MaxPacketSize {
		return ServerFrame{}, ErrTooLarge
	}
	f := ServerFrame{Type: t}
	exact := func(n int) error {
		if len(p) != n {
			return fmt.Errorf("%w: frame %d payload is %d bytes, want %d", ErrEncoding, t, len(p), n)
		}
		return nil
	}
	switch t {
	case FrameServerChallenge:
		err = exact(16)
		copy(f.Challenge[:], p)
	case FrameServerConfirmsAuth:
		err = exact(0)
	case FrameServerDeniesAuth:
		var s []byte
		if s, err = readPostcardBytes(p, true); err == nil && !utf8.Valid(s) {
			err = fmt.Errorf("%w: denial reason is not UTF-8", ErrEncoding)
		}
		f.Problem = string(s)
	case FrameRelayToClientDatagram, FrameRelayToClientBatch:
		err = decodeDatagrams(p, t == FrameRelayToClientBatch, &f.Src, &f.ECN, &f.SegmentSize, &f.Contents)
	case FrameEndpointGone:
		err = exact(KeyLen)
		copy(f.Gone[:], p)
	case FramePing, FramePong:
		err = exact(8)
		copy(f.Data[:], p)
	case FrameHealth:
		if !utf8.Valid(p) {
			err = fmt.Errorf("%w: health problem is not UTF-8", ErrEncoding)
		}
		f.Problem = string(p)
	case FrameStatus:
		if len(p) < 1 {
			err = ErrShort
		} else {
			f.Status = p[0]
		}
	case FrameRestarting:
		if err = exact(8); err == nil {
			f.ReconnectMs = uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])
			f.TryMs = uint32(p[4])<<24 | uint32(p[5])<<16 | uint32(p[6])<<8 | uint32(p[7])
		}
	default:
		err = fmt.Errorf("%w: %d from the relay", ErrFrameType, t)
	}
	if err != nil {
		return ServerFrame{}, err
	}
	return f, nil
}
