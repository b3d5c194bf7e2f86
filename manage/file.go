package manage

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/internal/boltsnap"
)

// FileName is the lists' database in the node's home.
const FileName = "manage.db"

// FileStore is the lists in manage.db, a bbolt file in the node home, one
// bucket per list: the ListStore of a node on one machine. bbolt's file
// lock keeps every other process out, so nothing changes the lists behind
// the Lists reading them (Changed is nil).
type FileStore struct {
	db *bolt.DB
}

var _ ListStore = (*FileStore)(nil)

// OpenFile opens (creating) manage.db in dir.
func OpenFile(dir string) (*FileStore, error) {
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("manage: open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range allLists {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("manage: %w", err)
	}
	return &FileStore{db: db}, nil
}

// Close closes the file.
func (f *FileStore) Close() error { return f.db.Close() }

func bucket(tx *bolt.Tx, list string) (*bolt.Bucket, error) {
	b := tx.Bucket([]byte(list))
	if b == nil {
		return nil, fmt.Errorf("manage: no list %q", list)
	}
	return b, nil
}

// Put implements ListStore.
func (f *FileStore) Put(_ context.Context, list string, key, value []byte, max int, clear ...string) (cleared [][]byte, err error) {
	err = f.db.Update(func(tx *bolt.Tx) error {
		bk, err := bucket(tx, list)
		if err != nil {
			return err
		}
		if max > 0 && bk.Get(key) == nil && bk.Stats().KeyN >= max {
			return fmt.Errorf("%w: %s holds %d entries, the limit (max_entries); remove some first", ErrFull, list, max)
		}
		cleared = make([][]byte, len(clear))
		for i, c := range clear {
			o, err := bucket(tx, c)
			if err != nil {
				return err
			}
			if v := o.Get(key); v != nil {
				cleared[i] = slices.Clone(v)
			}
			if err := o.Delete(key); err != nil {
				return err
			}
		}
		return bk.Put(key, value)
	})
	return cleared, err
}

// PutNew implements ListStore.
func (f *FileStore) PutNew(_ context.Context, list string, key, value []byte, max int, unless ...string) (added bool, err error) {
	err = f.db.Update(func(tx *bolt.Tx) error {
		for _, u := range unless {
			o, err := bucket(tx, u)
			if err != nil {
				return err
			}
			if o.Get(key) != nil {
				return nil
			}
		}
		bk, err := bucket(tx, list)
		if err != nil {
			return err
		}
		if max > 0 && bk.Get(key) == nil && bk.Stats().KeyN >= max {
			return fmt.Errorf("%w: %s holds %d entries, the limit (max_entries); remove some first", ErrFull, list, max)
		}
		added = true
		return bk.Put(key, value)
	})
	return added, err
}

// Delete implements ListStore.
func (f *FileStore) Delete(_ context.Context, list string, key []byte) (found bool, err error) {
	err = f.db.Update(func(tx *bolt.Tx) error {
		bk, err := bucket(tx, list)
		if err != nil {
			return err
		}
		found = bk.Get(key) != nil
		return bk.Delete(key)
	})
	return found, err
}

// Entries implements ListStore.
func (f *FileStore) Entries(_ context.Context, list string, fn func(key, value []byte) error) error {
	return f.db.View(func(tx *bolt.Tx) error {
		bk, err := bucket(tx, list)
		if err != nil {
			return err
		}
		return bk.ForEach(fn)
	})
}

// Load implements ListStore. The version is bbolt's transaction id, which
// every write transaction makes larger.
func (f *FileStore) Load(_ context.Context, fn func(list string, key, value []byte) error) (version uint64, err error) {
	err = f.db.View(func(tx *bolt.Tx) error {
		version = uint64(tx.ID())
		for _, l := range allLists {
			bk, err := bucket(tx, l)
			if err != nil {
				return err
			}
			if err := bk.ForEach(func(k, v []byte) error { return fn(l, k, v) }); err != nil {
				return err
			}
		}
		return nil
	})
	return version, err
}

// Version implements ListStore.
func (f *FileStore) Version(_ context.Context) (version uint64, err error) {
	err = f.db.View(func(tx *bolt.Tx) error {
		version = uint64(tx.ID())
		return nil
	})
	return version, err
}

// Changed implements ListStore: nil, since no other process opens the
// file while this one holds it.
func (f *FileStore) Changed() <-chan struct{} { return nil }

// Snapshot writes a consistent copy of manage.db for a backup of a running
// node (package boltsnap).
func (f *FileStore) Snapshot(fn func(size int64, write func(w io.Writer) error) error) error {
	return boltsnap.Of(f.db)(fn)
}
