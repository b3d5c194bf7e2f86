package store

// allocated is the space the store's files take on disk, Pebble's and
// the record segments', counted in blocks: Pebble preallocates each WAL to 110 % of a memtable, and keeps
// the WALs of small memtables until it flushes them, which its own size
// (logical bytes) leaves out. Files that say no block count count their
// size.
func (s *Store) allocated() uint64 {
	names, err := s.po.FS.List(s.dir)
	if err != nil {
		return 0
	}
	paths := make([]string, 0, len(names))
	for _, name := range names {
		paths = append(paths, s.po.FS.PathJoin(s.dir, name))
	}
	var total uint64
	for _, p := range append(paths, s.rec.diskFiles()...) {
		fi, err := s.po.FS.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		total += blocksOf(fi)
	}
	return total
}

// DiskBytes is the space the store's files take on disk, counted as
// storage_max_bytes counts it (in blocks). It lists the store's directory:
// for metrics and status, not for every save.
func (s *Store) DiskBytes() uint64 { return s.allocated() }

// MaxBytes is the store's storage bound (0: none).
func (s *Store) MaxBytes() uint64 { return s.opts.MaxBytes }
