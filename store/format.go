package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"fleetmesh.org/fleetmesh/nostr"
)

// Format is the layout version of the stores this build writes: the key
// layout in the package doc and the record encoding in codec.go. Change
// either and Format goes up by one, with a migration that rewrites an
// older store in place.
const Format = 3

// formatKey holds a store's Format as a uvarint. 0x00 sorts before every
// data prefix, so no index range ever meets it.
var formatKey = []byte("\x00format")

// A migration brings a store from format to-1 to format to. It writes
// through b, which is committed, with the new format, as one atomic batch:
// a crash leaves the store in the old format or the new one, never
// between. A migration too large for one batch commits batches of its
// own first, each of which leaves a store the migration can resume.
type migration struct {
	to    uint64
	what  string
	apply func(s *Store, b *pebble.Batch) error
}

// migrations run in order from a store's format up to Format.
var migrations = []migration{
	// Format 0 is every store written before the format key existed. Its
	// layout is format 1's, so moving up only records the version; a
	// store from then opens unchanged in every other byte.
	{to: 1, what: "record the store format", apply: func(*Store, *pebble.Batch) error { return nil }},
	// Format 2 keeps event records in segment files (records.go) instead
	// of in Pebble under their E keys; each E key then holds a location.
	{to: 2, what: "move the event records into records/ segments", apply: moveRecords},
	// Format 3 keeps one NIP-09 tombstone per id and deleter (D id pubkey)
	// where format 2 kept one per id (D id → the pubkey that asked last),
	// so that a later request by anyone else no longer lifts the author's.
	{to: 3, what: "key each deletion tombstone by its deleter", apply: splitTombstones},
}

// moveRecords is the migration to format 2: every E key that holds a
// record (anything but a location's 12 bytes) gets its record appended
// to the segments and holds its location instead, as do the event's I
// and index keys, in batches of about migrateChunk bytes. A crash between batches leaves some records moved;
// running it again moves the rest.
func moveRecords(s *Store, _ *pebble.Batch) error {
	s.opts.Logger.Info("store: moving event records out of Pebble into records/ segments; this takes about a minute per million events and runs once", "dir", s.dir)
	var resume []byte
	for {
		b := s.db.NewBatch()
		n, next, err := s.moveSomeRecords(b, resume)
		if err == nil && n > 0 {
			err = s.commitBatch(b)
		}
		b.Close()
		s.rec.abort()
		if err != nil {
			return err
		}
		if next == nil {
			break
		}
		resume = next
	}
	// The records' old copies would otherwise stay in Pebble's lower
	// levels until compactions reached them: the store's size on disk
	// would be about double for a while.
	return s.db.Compact(context.Background(), []byte{pEvent}, []byte{pEvent + 1}, true)
}

// migrateChunk is how many bytes of records one migration batch moves.
const migrateChunk = 8 << 20

// moveSomeRecords appends to b the moves of the records from key resume
// (the first E key if nil) on, up to migrateChunk bytes; next is where
// the next call starts, nil at the end.
func (s *Store) moveSomeRecords(b *pebble.Batch, resume []byte) (n int, next []byte, err error) {
	lower := []byte{pEvent}
	if resume != nil {
		lower = resume
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{pEvent + 1}})
	if err != nil {
		return 0, nil, err
	}
	defer it.Close()
	size := 0
	for ok := it.First(); ok; ok = it.Next() {
		if size >= migrateChunk {
			return n, bytes.Clone(it.Key()), nil
		}
		v := it.Value()
		if len(v) == locBytes {
			continue // moved by a run that crashed
		}
		serial := binary.BigEndian.Uint64(it.Key()[1:])
		var ev nostr.Event
		if err := decodeEvent(v, &ev); err != nil {
			return 0, nil, fmt.Errorf("event %d: %w", serial, err)
		}
		lc, err := s.rec.add(serial, v)
		if err != nil {
			return 0, nil, err
		}
		if err := setKeys(b, &ev, serial, lc); err != nil {
			return 0, nil, err
		}
		n++
		size += len(v)
	}
	return n, nil, it.Error()
}

// tombstoneChunk is how many tombstones one migration batch rewrites; a
// variable so that a test can make batches of a few.
var tombstoneChunk = 64 << 10

// splitTombstones is the migration to format 3: every format-2 tombstone
// D id → pubkey becomes D id pubkey (empty value), in batches of
// tombstoneChunk. The two shapes differ in length, so a crash between
// batches leaves some rewritten and running it again rewrites the rest.
// Only the pubkey an old store recorded is known: an author's deletion
// that a stranger's request overwrote there was lost before this ran.
func splitTombstones(s *Store, _ *pebble.Batch) error {
	resume := []byte{pDeletedID}
	for resume != nil {
		b := s.db.NewBatch()
		n, next, err := s.splitSomeTombstones(b, resume)
		if err == nil && n > 0 {
			err = b.Commit(pebble.Sync)
		}
		b.Close()
		if err != nil {
			return err
		}
		resume = next
	}
	return nil
}

// splitSomeTombstones appends to b the rewrite of up to tombstoneChunk
// format-2 tombstones from key resume on; next is where the next call
// starts, nil at the end.
func (s *Store) splitSomeTombstones(b *pebble.Batch, resume []byte) (n int, next []byte, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: resume, UpperBound: []byte{pDeletedID + 1}})
	if err != nil {
		return 0, nil, err
	}
	defer it.Close()
	var id, by [32]byte
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) == 1+len(id)+len(by) {
			continue // format 3 already
		}
		if n == tombstoneChunk {
			return n, bytes.Clone(k), nil
		}
		v := it.Value()
		if len(k) != 1+len(id) || len(v) != len(by) {
			return 0, nil, fmt.Errorf("tombstone key %x holds %x: the store is damaged; restore a backup", k, v)
		}
		copy(id[:], k[1:])
		copy(by[:], v)
		if err := b.Delete(k, nil); err != nil {
			return 0, nil, err
		}
		if err := b.Set(deletedIDKey(id, by), nil, nil); err != nil {
			return 0, nil, err
		}
		n++
	}
	return n, nil, it.Error()
}

// ErrNewerFormat is wrapped by Open for a store written by a newer build.
var ErrNewerFormat = errors.New("store: written by a newer fleetmesh")

// migrate reads db's format, refuses one newer than Format, and runs the
// migrations that bring an older store up to Format. A new, empty store
// is stamped with Format. It reports each migration it ran through log.
func migrate(s *Store, log func(msg string, args ...any)) error {
	dir, db := s.dir, s.db
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
		if err := m.apply(s, b); err != nil {
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

// readTail reads the records' committed tail from db; haveTail is false
// when no batch has appended a record yet.
func readTail(db *pebble.DB) (haveTail bool, seg, off uint32, err error) {
	v, closer, err := db.Get(tailKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, 0, 0, nil
	}
	if err != nil {
		return false, 0, 0, fmt.Errorf("store: read the records' tail: %w", err)
	}
	defer closer.Close()
	seg, off, err = decodeTail(v)
	return err == nil, seg, off, err
}

// readSeals reads every sealed segment's end from db.
func readSeals(db *pebble.DB) (map[uint32]uint32, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: sealPrefix, UpperBound: prefixEnd(sealPrefix)})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	seals := map[uint32]uint32{}
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != len(sealPrefix)+4 || len(v) != 4 {
			it.Close()
			return nil, fmt.Errorf("store: a record seal key %x holds %x: the store is damaged; restore a backup", k, v)
		}
		seals[binary.BigEndian.Uint32(k[len(sealPrefix):])] = binary.BigEndian.Uint32(v)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return seals, nil
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
