//go:build !unix

package store

import "os"

// blocksOf is a file's size: without a block count, preallocated space is
// not seen here (the free-space reserve still holds).
func blocksOf(fi os.FileInfo) uint64 { return uint64(fi.Size()) }
