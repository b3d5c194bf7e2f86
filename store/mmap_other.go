//go:build !unix

package store

// mapFile maps nothing where the store has no mmap: segments are read
// with ReadAt.
func mapFile(uintptr, int) []byte { return nil }

// unmapFile releases a mapFile mapping.
func unmapFile([]byte) {}
