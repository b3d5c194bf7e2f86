package boltsnap

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestSnapshotWhileWriting copies a database while another goroutine
// writes to it: the copy has the size it was announced with, opens, and
// holds every key committed before the snapshot.
func TestSnapshotWhileWriting(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "a.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(i int) error {
		return db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("k"))
			if err != nil {
				return err
			}
			return b.Put([]byte(fmt.Sprint(i)), bytes.Repeat([]byte{byte(i)}, 100))
		})
	}
	for i := range 100 {
		if err := put(i); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		for i := 100; i < 300; i++ {
			if err := put(i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var copied bytes.Buffer
	var announced int64
	err = Of(db)(func(size int64, write func(w io.Writer) error) error {
		announced = size
		return write(&copied)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if int64(copied.Len()) != announced {
		t.Fatalf("copied %d bytes, announced %d", copied.Len(), announced)
	}
	path := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(path, copied.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	err = cp.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("k"))
		for i := range 100 {
			if v := b.Get([]byte(fmt.Sprint(i))); len(v) != 100 || v[0] != byte(i) {
				return fmt.Errorf("key %d reads %v", i, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
