package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Format is the layout version of the stores this build writes: the key
// layout in the package doc and the record encoding in codec.go. Change
// either and Format goes up by one, with a migration that rewrites an
// older store in place.
const Format = 1

// formatKey holds a store's Format as a uvarint. 0x00 sorts before every
// data prefix, so no index range ever meets it.
var formatKey = []byte("\x00format")

// A migration brings a store from format to-1 to format to. It writes
// through b, which is committed, with the new format, as one atomic batch:
// a crash leaves the store in the old format or the new one, never
// between.
type migration struct {
	to    uint64
	what  string
	apply func(db *pebble.DB, b *pebble.Batch) error
}

// migrations run in order from a store's format up to Format.
var migrations = []migration{
	// Format 0 is every store written before the format key existed. Its
	// layout is format 1's, so moving up only records the version; a
	// store from then opens unchanged in every other byte.
	{to: 1, what: "record the store format", apply: func(*pebble.DB, *pebble.Batch) error { return nil }},
}

// ErrNewerFormat is wrapped by Open for a store written by a newer build.
var ErrNewerFormat = errors.New("store: written by a newer fleetmesh")

// migrate reads db's format, refuses one newer than Format, and runs the
// migrations that bring an older store up to Format. A new, empty store
// is stamped with Format. It reports each migration it ran through log.
func migrate(dir string, db *pebble.DB, log func(msg string, args ...any)) error {
	v, found, err := readFormat(db)
	if err != nil {
		return err
	}
	if !found {
		empty, err := isEmpty(db)
		if err != nil {
			return err
		}
		if empty {
			return writeFormat(db, db.NewBatch(), Format)
		}
	}
	if v > Format {
		return fmt.Errorf("%w: %s holds store format %d and this build reads formats up to %d; run the newer fleetmesh, or restore a backup made before the upgrade (docs/operators.md, \"Upgrades\")", ErrNewerFormat, dir, v, Format)
	}
	for _, m := range migrations {
		if m.to <= v {
			continue
		}
		b := db.NewBatch()
		if err := m.apply(db, b); err != nil {
			b.Close()
			return fmt.Errorf("store: migrate %s from format %d to %d (%s): %w", dir, v, m.to, m.what, err)
		}
		if err := writeFormat(db, b, m.to); err != nil {
			return fmt.Errorf("store: migrate %s from format %d to %d: %w", dir, v, m.to, err)
		}
		log("store: migrated", "dir", dir, "from", v, "to", m.to, "what", m.what)
		v = m.to
	}
	return nil
}

// readFormat returns db's format; found is false for a store that has no
// format key (a new one, or one of format 0).
func readFormat(db *pebble.DB) (v uint64, found bool, err error) {
	val, closer, err := db.Get(formatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: read the store format: %w", err)
	}
	defer closer.Close()
	v, n := binary.Uvarint(val)
	if n <= 0 || n != len(val) {
		return 0, false, fmt.Errorf("store: the store format key holds %x, not a version number: the store is damaged; restore a backup", val)
	}
	return v, true, nil
}

// writeFormat commits b with the format set to v, durably.
func writeFormat(db *pebble.DB, b *pebble.Batch, v uint64) error {
	defer b.Close()
	if err := b.Set(formatKey, binary.AppendUvarint(nil, v), nil); err != nil {
		return err
	}
	if err := db.Apply(b, pebble.Sync); err != nil {
		return fmt.Errorf("store: write the store format: %w", err)
	}
	return nil
}

// isEmpty reports whether db holds no key at all.
func isEmpty(db *pebble.DB) (bool, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	return empty, nil
}
