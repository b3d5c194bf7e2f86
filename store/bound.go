package store

import (
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/eventstore"
)

// ErrFull is returned by Save when the store is at its storage bound or
// its filesystem is nearly full: the save is refused before the disk is,
// so Pebble never meets ENOSPC in the ordinary run of things (see
// failure.go for when it does anyway). Reads go on; writes resume once
// space returns (expired or dropped events removed, the disk freed).
var ErrFull = eventstore.ErrFull

// boundCheckEvery is how long one reading of the store's size stands: it
// reads Pebble's metrics, too dear for every commit of a busy store. Free
// space (one statfs) is read at every commit that writes.
const boundCheckEvery = 250 * time.Millisecond

// reserve is the free space the filesystem must keep: Pebble preallocates
// each new WAL to 110 % of a memtable, and a memtable's flush writes up to
// a memtable's worth of tables before the old WAL goes, so twice 110 % of
// a memtable and 4 MiB for the manifest and compactions' first steps.
func (o *Options) reserve() uint64 {
	return 2*(o.MemTableBytes+o.MemTableBytes/10) + 4<<20
}

// checkBound reports ErrFull when the store uses MaxBytes or more, or the
// filesystem has less than the reserve free. It belongs to the writer.
func (s *Store) checkBound() error {
	if s.db == nil {
		return nil
	}
	if now := time.Now(); s.opts.MaxBytes > 0 && !now.Before(s.boundAt) {
		s.boundAt = now.Add(boundCheckEvery)
		s.used = max(s.db.Metrics().DiskSpaceUsage()+s.rec.bytes(), s.allocated())
	}
	if s.opts.MaxBytes > 0 && s.used >= s.opts.MaxBytes {
		return fmt.Errorf("%w: the store uses %d bytes of its bound of %d (storage_max_bytes)", ErrFull, s.used, s.opts.MaxBytes)
	}
	du, err := s.po.FS.GetDiskUsage(s.dir)
	if err != nil {
		return nil // not every filesystem says; the bound above still holds
	}
	if du.AvailBytes < s.opts.reserve() {
		return fmt.Errorf("%w: the filesystem of %s has %d bytes free, under the %d the store keeps in reserve", ErrFull, s.dir, du.AvailBytes, s.opts.reserve())
	}
	return nil
}
