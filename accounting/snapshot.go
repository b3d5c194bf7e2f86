package accounting

import (
	"io"

	bolt "go.etcd.io/bbolt"
)

// Snapshot hands fn a consistent copy of the accounting database (DBFile)
// while the node runs, for a backup: its size, and write, which copies it
// to w. Receipts and grants are the node's history, held nowhere else, so
// a backup must carry them; the copy is one bbolt read transaction, so
// writes wait for nothing.
func (s *Service) Snapshot(fn func(size int64, write func(w io.Writer) error) error) error {
	return s.db.b.View(func(tx *bolt.Tx) error {
		return fn(tx.Size(), func(w io.Writer) error {
			_, err := tx.WriteTo(w)
			return err
		})
	})
}
