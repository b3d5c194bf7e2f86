//go:build unix

package store

import (
	"os"
	"syscall"
)

// blocksOf is the space a file takes on disk: its blocks where the
// filesystem says, else its size.
func blocksOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Blocks) * 512
	}
	return uint64(fi.Size())
}
