package peerexchange

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/multiformats/go-varint"
)

// ErrMalformed is wrapped by every error about a peer exchange message
// that breaks spec/mesh-discovery.md.
var ErrMalformed = errors.New("malformed peer exchange message")

// descriptorSum is the SHA-256 of a signed descriptor's bytes: how peer
// exchange names a descriptor without sending it.
type descriptorSum = [sha256.Size]byte

// message is one message of a peer exchange (spec/mesh-discovery.md):
// signed descriptors the receiver asked for, the sums of descriptors the
// sender offers, and the sums of offered descriptors the sender wants.
type message struct {
	descriptors [][]byte
	offer       []descriptorSum
	want        []descriptorSum
}

// appendMessage encodes m: the descriptors (a uvarint count, then each
// as a uvarint length and its bytes), then the offered and the wanted sums
// (each a uvarint count and 32 bytes per sum).
func appendMessage(dst []byte, m message) []byte {
	dst = append(dst, varint.ToUvarint(uint64(len(m.descriptors)))...)
	for _, d := range m.descriptors {
		dst = append(dst, varint.ToUvarint(uint64(len(d)))...)
		dst = append(dst, d...)
	}
	for _, sums := range [][]descriptorSum{m.offer, m.want} {
		dst = append(dst, varint.ToUvarint(uint64(len(sums)))...)
		for _, s := range sums {
			dst = append(dst, s[:]...)
		}
	}
	return dst
}

// readMessage decodes one peer exchange message from r, refusing more
// than maxCount entries in any of its three lists, and empty descriptors or
// ones over maxBytes, before reading them.
func readMessage(r *bufio.Reader, maxCount, maxBytes int) (message, error) {
	var m message
	n, err := readCount(r, "descriptor", maxCount)
	if err != nil {
		return m, err
	}
	m.descriptors = make([][]byte, 0, n)
	for i := range n {
		l, err := varint.ReadUvarint(r)
		if err != nil {
			return m, fmt.Errorf("%w: descriptor %d length: %v", ErrMalformed, i, err)
		}
		if l == 0 || l > uint64(maxBytes) {
			return m, fmt.Errorf("%w: descriptor %d is %d bytes, want 1 to %d", ErrMalformed, i, l, maxBytes)
		}
		d := make([]byte, l)
		if _, err := io.ReadFull(r, d); err != nil {
			return m, fmt.Errorf("%w: descriptor %d: %v", ErrMalformed, i, err)
		}
		m.descriptors = append(m.descriptors, d)
	}
	for _, list := range []struct {
		name string
		dst  *[]descriptorSum
	}{{"offered sum", &m.offer}, {"wanted sum", &m.want}} {
		n, err := readCount(r, list.name, maxCount)
		if err != nil {
			return m, err
		}
		sums := make([]descriptorSum, n)
		for i := range sums {
			if _, err := io.ReadFull(r, sums[i][:]); err != nil {
				return m, fmt.Errorf("%w: %s %d: %v", ErrMalformed, list.name, i, err)
			}
		}
		*list.dst = sums
	}
	return m, nil
}

func readCount(r *bufio.Reader, what string, maxCount int) (uint64, error) {
	n, err := varint.ReadUvarint(r)
	if err != nil {
		return 0, fmt.Errorf("%w: %s count: %v", ErrMalformed, what, err)
	}
	if n > uint64(maxCount) {
		return 0, fmt.Errorf("%w: %d of %s, at most %d", ErrMalformed, n, what, maxCount)
	}
	return n, nil
}
