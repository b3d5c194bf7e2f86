package store

// allocated is the space the store's files take on disk, counted in
// blocks: Pebble preallocates each WAL to 110 % of a memtable, and keeps
// the WALs of small memtables until it flushes them, which its own size
// (logical bytes) leaves out. Files that say no block count count their
// size.
func (s *Store) allocated() uint64 {
	names, err := s.po.FS.List(s.dir)
	if err != nil {
		return 0
	}
	var total uint64
	for _, name := range names {
		fi, err := s.po.FS.Stat(s.po.FS.PathJoin(s.dir, name))
		if err != nil || fi.IsDir() {
			continue
		}
		total += blocksOf(fi)
	}
	return total
}
