package mediator

import (
	"io"

	bolt "go.etcd.io/bbolt"
)

// Snapshot hands fn a consistent copy of the mediator's database
// (FileName) while it runs, for a backup: its size, and write, which
// copies it to w. Queued messages for leaves live only here.
func (m *Mediator) Snapshot(fn func(size int64, write func(w io.Writer) error) error) error {
	return m.store.db.View(func(tx *bolt.Tx) error {
		return fn(tx.Size(), func(w io.Writer) error {
			_, err := tx.WriteTo(w)
			return err
		})
	})
}
