package agent

import (
	"io"

	"fleetmesh.org/fleetmesh/didcomm/mediator"
)

// SnapshotPath is where, under the Service's directory, the database that
// Snapshot copies lives.
const SnapshotPath = MediatorDir + "/" + mediator.FileName

// Snapshot hands fn a consistent copy of the mediation queue's database
// (SnapshotPath) while the Service runs, for a backup.
func (s *Service) Snapshot(fn func(size int64, write func(w io.Writer) error) error) error {
	return s.mediator.Snapshot(fn)
}
