package manage

import (
	"context"
	"fmt"
	"slices"
)

// The lists a ListStore holds, by name. Keys: a pubkey or event id as 64
// hex characters, a kind as 8 bytes big-endian, an address or prefix as
// its text, an info field's name; values: the reason the operator gave
// (JSON for events needing moderation, the text for an info field).
const (
	ListBannedPubkeys  = "banned_pubkeys"
	ListAllowedPubkeys = "allowed_pubkeys"
	ListBannedEvents   = "banned_events"
	ListAllowedEvents  = "allowed_events"
	ListHeldEvents     = "held_events"
	ListAllowedKinds   = "allowed_kinds"
	ListDisallowKinds  = "disallowed_kinds"
	ListBlockedIPs     = "blocked_ips"
	ListInfo           = "info"
)

// allLists is every list a store holds.
var allLists = []string{ListBannedPubkeys, ListAllowedPubkeys, ListBannedEvents, ListAllowedEvents,
	ListHeldEvents, ListAllowedKinds, ListDisallowKinds, ListBlockedIPs, ListInfo}

// ListStore keeps the lists durably. Two implement it: FileStore, the
// bbolt file manage.db in the node home, for a node on one machine; and
// package pgstore's ManageLists, tables in the node's PostgreSQL database,
// which every front-end of one node shares, so a ban made through one
// holds at all of them.
//
// Lists reads a store only to rebuild its in-memory view and to answer
// the NIP-86 list methods; the relay's checks never reach it.
type ListStore interface {
	// Put sets key's value in list and removes key from each list of
	// clear, in one transaction, returning the values it held there (nil
	// where it held none). With max > 0, a list already holding max
	// entries and not key is left as it is and Put returns an error
	// wrapping ErrFull.
	Put(ctx context.Context, list string, key, value []byte, max int, clear ...string) (cleared [][]byte, err error)
	// PutNew sets key's value in list only if key is in none of the
	// lists of unless (name list among them to leave an entry as it is),
	// in one transaction, and reports whether it did; max as for Put.
	PutNew(ctx context.Context, list string, key, value []byte, max int, unless ...string) (added bool, err error)
	// Delete removes key from list and reports whether it was there.
	Delete(ctx context.Context, list string, key []byte) (found bool, err error)
	// Entries calls fn for each entry of list, in key order. Here and in
	// Load, key and value are fn's only during the call.
	Entries(ctx context.Context, list string, fn func(key, value []byte) error) error
	// Load calls fn for every entry of every list, all read from one
	// consistent state, and returns that state's Version.
	Load(ctx context.Context, fn func(list string, key, value []byte) error) (version uint64, err error)
	// Version is a number that every change makes larger: a view loaded
	// at the version the store still has is current.
	Version(ctx context.Context) (uint64, error)
	// Changed returns a channel that is closed when another process may
	// have changed the lists (take it before reading Version, so no change
	// slips between). Nil when no other process can change them.
	Changed() <-chan struct{}
}

// Notifier is a ListStore that can say when its Changed is reliable: while
// Listening, every change made through the store closes Changed, and so
// does the loss or return of the store's own connection to the others,
// so Lists reads the version only every ListOptions.PollListening then.
// pgstore's ManageLists is one, while its listener is connected.
type Notifier interface {
	Listening() bool
}

// CopyLists copies every entry of src into dst (what dst holds already is
// kept, or overwritten by src's value), as `fleetmesh store migrate`
// moves a node's lists from manage.db into PostgreSQL. It returns how
// many entries it copied.
func CopyLists(ctx context.Context, dst, src ListStore) (int, error) {
	type entry struct {
		list       string
		key, value []byte
	}
	var all []entry
	if _, err := src.Load(ctx, func(list string, k, v []byte) error {
		all = append(all, entry{list, slices.Clone(k), slices.Clone(v)})
		return nil
	}); err != nil {
		return 0, fmt.Errorf("manage: read the lists to copy: %w", err)
	}
	for i, e := range all {
		if _, err := dst.Put(ctx, e.list, e.key, e.value, 0); err != nil {
			return i, fmt.Errorf("manage: copy %s entry %q: %w", e.list, e.key, err)
		}
	}
	return len(all), nil
}
