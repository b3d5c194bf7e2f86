package mesh

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/multiformats/go-varint"
)

// ErrPEXMalformed is wrapped by every error about a peer exchange message
// that breaks spec/mesh-discovery.md.
var ErrPEXMalformed = errors.New("malformed peer exchange message")

// appendPEXMessage encodes a peer exchange message: the number of signed
// descriptors as an unsigned varint, then each as an unsigned varint length
// and its bytes.
func appendPEXMessage(dst []byte, descriptors [][]byte) []byte {
	dst = append(dst, varint.ToUvarint(uint64(len(descriptors)))...)
	for _, d := range descriptors {
		dst = append(dst, varint.ToUvarint(uint64(len(d)))...)
		dst = append(dst, d...)
	}
	return dst
}

// readPEXMessage decodes one peer exchange message from r, refusing more
// than maxCount descriptors, empty ones and ones over maxBytes before
// reading them.
func readPEXMessage(r *bufio.Reader, maxCount, maxBytes int) ([][]byte, error) {
	n, err := varint.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("%w: count: %v", ErrPEXMalformed, err)
	}
	if n > uint64(maxCount) {
		return nil, fmt.Errorf("%w: %d descriptors, at most %d", ErrPEXMalformed, n, maxCount)
	}
	out := make([][]byte, 0, n)
	for i := range n {
		l, err := varint.ReadUvarint(r)
		if err != nil {
			return nil, fmt.Errorf("%w: descriptor %d length: %v", ErrPEXMalformed, i, err)
		}
		if l == 0 || l > uint64(maxBytes) {
			return nil, fmt.Errorf("%w: descriptor %d is %d bytes, want 1 to %d", ErrPEXMalformed, i, l, maxBytes)
		}
		d := make([]byte, l)
		if _, err := io.ReadFull(r, d); err != nil {
			return nil, fmt.Errorf("%w: descriptor %d: %v", ErrPEXMalformed, i, err)
		}
		out = append(out, d)
	}
	return out, nil
}
