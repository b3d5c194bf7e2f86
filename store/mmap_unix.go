//go:build unix

package store

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// mapFile maps n bytes of the file open as fd for reading, shared with
// the page cache, or returns nil when it cannot (a 32-bit build, whose
// address space could not hold a large store's segments, reads with
// pread instead). The mapping may run past the file's end: only bytes
// the file holds are ever read through it.
func mapFile(fd uintptr, n int) []byte {
	if strconv.IntSize < 64 || n <= 0 {
		return nil
	}
	b, err := unix.Mmap(int(fd), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return b
}

// unmapFile releases a mapFile mapping.
func unmapFile(b []byte) {
	if b != nil {
		unix.Munmap(b)
	}
}
