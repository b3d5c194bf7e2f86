package accounting

import (
	"io"

	"fleetmesh.org/fleetmesh/internal/boltsnap"
)

// Snapshot hands fn a consistent copy of the accounting database (DBFile)
// while the node runs, for a backup: its size, and write, which copies it
// to w. Receipts and grants are the node's history, held nowhere else, so
// a backup must carry them.
func (s *Service) Snapshot(fn func(size int64, write func(w io.Writer) error) error) error {
	return boltsnap.Of(s.db.b)(fn)
}
