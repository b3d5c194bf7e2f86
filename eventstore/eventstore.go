// Package eventstore names what every store of Nostr events reports to the
// parts that use one: the outcome of a save, the errors of a store that is
// full or has stopped writing, and the in-place view of a stored event a
// fast query hands out. The relay, the sync service and the gateway depend
// on these names only, so that a second store (a server-class backend on a
// large anchor, say) can serve them without importing the embedded Pebble
// store, package store, which is one implementation and re-exports these
// names as os does io/fs's.
//
// It holds no interface of a whole store: each consumer declares the few
// methods it calls (relay.Store, meshsync.Local), as Go interfaces belong
// with their users. It is not a store and has no state.
package eventstore

import (
	"errors"
	"strconv"

	"fleetmesh.org/fleetmesh/nostr"
)

// Result says what a save did with an event.
type Result int

// Save results.
const (
	// Stored: the event is now on disk.
	Stored Result = iota
	// Duplicate: the same event was already on disk.
	Duplicate
	// Superseded: a newer version of this replaceable or addressable event
	// is stored, so this one was not.
	Superseded
	// Deleted: the author deleted this event (NIP-09), so it was not stored.
	Deleted
	// Expired: the event's NIP-40 expiration has passed.
	Expired
)

func (r Result) String() string {
	switch r {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	case Superseded:
		return "superseded"
	case Deleted:
		return "deleted"
	case Expired:
		return "expired"
	}
	return "result(" + strconv.Itoa(int(r)) + ")"
}

// ErrFull is wrapped by a save refused because the store is at its
// storage bound, or its filesystem has less free space than the store
// keeps in reserve. Reads go on; writes resume once space returns.
var ErrFull = errors.New("storage full")

// ErrWritesStopped is wrapped by a save refused after a commit failed on
// disk (a full disk, an I/O error): the store stays readable and refuses
// writes until it has reopened its database cleanly.
var ErrWritesStopped = errors.New("store: writes stopped after a failed commit")

// Raw is one stored event as a fast query hands it out, read in place
// without decoding it into a nostr.Event. It is valid only during the
// callback that receives it; Event makes a copy that outlives it.
type Raw interface {
	// ID, PubKey, CreatedAt and Kind are the event's fields.
	ID() [32]byte
	PubKey() [32]byte
	CreatedAt() int64
	Kind() int
	// AppendJSON appends the event's NIP-01 JSON to dst.
	AppendJSON(dst []byte) []byte
	// Event decodes the event.
	Event() (*nostr.Event, error)
}
