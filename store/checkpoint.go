package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Checkpoint writes a consistent copy of the store to dest, a directory
// that must not exist, while the store serves: every event acknowledged
// before the call is in it. It is a Pebble checkpoint: the write-ahead log
// is synced first, and tables are hard-linked where dest is on the same
// filesystem (so dest costs little space until compactions replace the
// linked tables), copied otherwise. dest opens as a store of this format.
func (s *Store) Checkpoint(dest string) error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return errNoDB
	}
	if err := s.db.Checkpoint(dest, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("store: checkpoint to %s: %w", dest, err)
	}
	return nil
}

// CheckpointDir is Checkpoint for a store no process has open: it opens
// the store at dir without migrating it (the copy keeps the format it
// has, so a backup made with a newer build before an upgrade still opens
// in the older one), checkpoints it to dest, and closes it. A store that
// another process holds is refused by Pebble's lock.
func CheckpointDir(dir, dest string) error {
	if _, err := vfs.Default.Stat(dir); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, ErrorIfNotExists: true})
	if err != nil {
		return fmt.Errorf("store: open %s: %w", dir, err)
	}
	if err := db.Checkpoint(dest, pebble.WithFlushedWAL()); err != nil {
		db.Close()
		return fmt.Errorf("store: checkpoint %s to %s: %w", dir, dest, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", dir, err)
	}
	return nil
}
