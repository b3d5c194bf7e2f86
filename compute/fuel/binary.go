package fuel

import (
	"errors"
	"fmt"
	"math"
)

// errEOF is returned when a section or body ends inside a value.
var errEOF = errors.New("unexpected end")

// reader reads the WebAssembly binary format from a byte slice. Every read
// is bounds checked; nothing is allocated from a length it reads until the
// bytes for it are known to exist.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) done() bool { return r.pos >= len(r.b) }

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errEOF
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(r.b)-r.pos) {
		return nil, errEOF
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

// u32 reads an unsigned LEB128 value of at most 32 bits.
func (r *reader) u32() (uint32, error) {
	var v uint64
	for shift := uint(0); shift < 35; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if v > math.MaxUint32 {
				return 0, errors.New("u32 out of range")
			}
			return uint32(v), nil
		}
	}
	return 0, errors.New("u32 too long")
}

// signed reads a signed LEB128 value of at most bits bits and returns it.
func (r *reader) signed(bits uint) (int64, error) {
	var v int64
	var shift uint
	maxBytes := (bits + 6) / 7
	for i := uint(0); i < maxBytes; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("s%d too long", bits)
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendU32 appends v as unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// appendS64 appends v as signed LEB128.
func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// Value types.
const (
	typeI32       = 0x7f
	typeI64       = 0x7e
	typeF32       = 0x7d
	typeF64       = 0x7c
	typeV128      = 0x7b
	typeFuncref   = 0x70
	typeExternref = 0x6f
)

// valType reads a value type and refuses those the pass cannot run.
func (r *reader) valType() (byte, error) {
	t, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch t {
	case typeI32, typeI64, typeF32, typeF64, typeFuncref, typeExternref:
		return t, nil
	case typeV128:
		return 0, fmt.Errorf("%w: SIMD (v128)", ErrRefused)
	}
	return 0, fmt.Errorf("invalid value type 0x%02x", t)
}
