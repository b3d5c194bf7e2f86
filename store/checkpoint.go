package store

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Checkpoint writes a consistent copy of the store to dest, a directory
// that must not exist, while the store serves: every event acknowledged
// before the call is in it. It is a Pebble checkpoint: the write-ahead log
// is synced first, and tables are hard-linked where dest is on the same
// filesystem (so dest costs little space until compactions replace the
// linked tables), copied otherwise. The record segments follow it (see
// copyRecords). dest opens as a store of this format.
func (s *Store) Checkpoint(dest string) error {
	// No segment the checkpoint names is removed while it is copied.
	epoch, err := s.beginRead()
	if err != nil {
		return err
	}
	defer s.endRead(epoch)
	if err := s.db.Checkpoint(dest, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("store: checkpoint to %s: %w", dest, err)
	}
	return copyRecords(s.po.FS, s.dir, dest)
}

// copyRecords copies the record segments of the store in dir to dest,
// after dest's Pebble checkpoint, so that every segment the checkpoint
// names is there and holds at least the bytes its tail names (a segment
// only grows, or goes when compacted, which a reader's epoch holds off).
// Each segment but the newest is sealed and never written again, so it is
// hard-linked where the filesystem allows; the newest is copied, since
// the store goes on appending to it. What the copy holds past the
// checkpoint's tail, or of segments it no longer names, Open drops.
func copyRecords(fs vfs.FS, dir, dest string) error {
	src, dst := fs.PathJoin(dir, recordsDir), fs.PathJoin(dest, recordsDir)
	names, err := fs.List(src)
	if err != nil {
		return fmt.Errorf("store: checkpoint records: %w", err)
	}
	var ids []uint32
	for _, name := range names {
		if id, ok := parseSegmentName(name); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if err := fs.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("store: checkpoint records: %w", err)
	}
	for i, id := range ids {
		from, to := fs.PathJoin(src, segmentName(id)), fs.PathJoin(dst, segmentName(id))
		if i < len(ids)-1 && fs.Link(from, to) == nil {
			continue
		}
		if err := vfs.CopyAcrossFS(fs, from, fs, to); err != nil {
			return fmt.Errorf("store: checkpoint records: %w", err)
		}
	}
	d, err := fs.OpenDir(dst)
	if err != nil {
		return fmt.Errorf("store: checkpoint records: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: checkpoint records: %w", err)
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
	if _, err := vfs.Default.Stat(vfs.Default.PathJoin(dir, recordsDir)); err == nil {
		if err := copyRecords(vfs.Default, dir, dest); err != nil {
			db.Close()
			return err
		}
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", dir, err)
	}
	return nil
}
