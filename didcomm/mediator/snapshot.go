package mediator

import (
	"io"

	"fleetmesh.org/fleetmesh/internal/boltsnap"
)

// Snapshot hands fn a consistent copy of the mediator's database
// (FileName) while it runs, for a backup: its size, and write, which
// copies it to w. Queued messages for leaves live only here.
func (m *Mediator) Snapshot(fn func(size int64, write func(w io.Writer) error) error) error {
	return boltsnap.Of(m.store.db)(fn)
}
