// Package boltsnap copies a bbolt database consistently while it is in
// use, for backups (fleetmesh backup, node/backup.go): the copy is one
// read transaction, so writers wait for nothing and the copy is never
// torn. It is not a backup format or a scheduler; the caller says where
// the bytes go.
package boltsnap

import (
	"io"

	bolt "go.etcd.io/bbolt"
)

// Func is how an owner of an open database hands out a snapshot of it:
// fn gets the copy's size and write, which copies it to w; both are valid
// only until fn returns.
type Func func(fn func(size int64, write func(w io.Writer) error) error) error

// Of returns db's snapshots.
func Of(db *bolt.DB) Func {
	return func(fn func(size int64, write func(w io.Writer) error) error) error {
		return db.View(func(tx *bolt.Tx) error {
			return fn(tx.Size(), func(w io.Writer) error {
				_, err := tx.WriteTo(w)
				return err
			})
		})
	}
}
