package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// ErrEphemeral is wrapped by Save for an ephemeral event: those are never
// stored; Broadcast hands one to the other front-ends' followers.
var ErrEphemeral = errors.New("pgstore: ephemeral events are never stored")

// Save stores an event durably, applying its kind's storage rules: the
// Pebble store's, in one transaction that holds transaction-level
// advisory locks on the event's id and replacement slot (and, for a
// deletion request, on every id and address it names), so that saves
// through any number of connections and processes serialise where they
// touch the same event or slot and nowhere else. The event's signature
// must already have been verified. When Save returns Stored with a nil
// error, the event and its change are committed.
func (s *Store) Save(ctx context.Context, ev *nostr.Event) (eventstore.Result, error) {
	if nostr.ClassOf(ev.Kind) == nostr.Ephemeral {
		return 0, fmt.Errorf("%w: kind %d", ErrEphemeral, ev.Kind)
	}
	if s.closed() {
		return 0, ErrClosed
	}
	if exp, ok := ev.Expiration(); ok && exp <= s.opts.Now().Unix() {
		return eventstore.Expired, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: save %s: %w", ev.IDHex(), err)
	}
	defer conn.Release()
	res, err := s.save(ctx, conn, ev)
	if err != nil {
		// A transaction left open by a failed batch is rolled back; the
		// pool drops a connection still in one when it comes back.
		conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		return 0, fmt.Errorf("pgstore: save %s: %w", ev.IDHex(), err)
	}
	return res, nil
}

// slot is a replacement slot: a replaceable event's (pubkey, kind, ""), an
// addressable event's (pubkey, kind, d).
type slot struct {
	pubkey [32]byte
	kind   int
	d      string
}

// slotOf returns ev's slot, and false for kinds that are never replaced.
func slotOf(ev *nostr.Event) (slot, bool) {
	switch nostr.ClassOf(ev.Kind) {
	case nostr.Replaceable:
		return slot{ev.PubKey, ev.Kind, ""}, true
	case nostr.Addressable:
		return slot{ev.PubKey, ev.Kind, ev.DTag()}, true
	}
	return slot{}, false
}

// Advisory lock keys: an id's is its first 8 bytes (ids are hashes), a
// slot's a hash of it. Two keys that collide only serialise two saves that
// did not need it.
func idLock(id [32]byte) int64 { return int64(binary.BigEndian.Uint64(id[:8])) }

func (sl slot) lock() int64 {
	h := xxhash.New()
	h.Write(sl.pubkey[:])
	h.Write(binary.BigEndian.AppendUint16(nil, uint16(sl.kind)))
	h.WriteString(sl.d)
	return int64(h.Sum64())
}

// deletion is what a NIP-09 deletion request names that its author may
// delete: ids by "e" tags and slots by "a" tags.
type deletion struct {
	ids   [][]byte
	slots []slot
}

func deletionOf(del *nostr.Event) deletion {
	var d deletion
	seen := map[[32]byte]bool{}
	seenSlot := map[slot]bool{}
	for _, t := range del.Tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "e":
			var id [32]byte
			if nostr.DecodeHex(id[:], t[1]) != nil || seen[id] {
				continue
			}
			seen[id] = true
			d.ids = append(d.ids, id[:])
		case "a":
			sl, ok := parseAddress(t[1])
			if !ok || sl.pubkey != del.PubKey || seenSlot[sl] {
				continue
			}
			seenSlot[sl] = true
			d.slots = append(d.slots, sl)
		}
	}
	return d
}

// parseAddress parses an "a" tag value kind:pubkey:d; a replaceable
// kind's address has d "" whatever it says.
func parseAddress(a string) (slot, bool) {
	ks, rest, ok1 := strings.Cut(a, ":")
	ps, d, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return slot{}, false
	}
	var sl slot
	k, err := strconv.Atoi(ks)
	if err != nil || k < 0 || k > nostr.MaxKind || nostr.DecodeHex(sl.pubkey[:], ps) != nil {
		return slot{}, false
	}
	if nostr.ClassOf(k) == nostr.Replaceable {
		d = ""
	}
	sl.kind, sl.d = k, d
	return sl, true
}

// tagValues lists ev's distinct single-letter tags as the tags table
// holds them: the letter's byte, then the first value.
func tagValues(ev *nostr.Event) [][]byte {
	var out [][]byte
	for _, t := range ev.Tags {
		if len(t) < 2 || len(t[0]) != 1 {
			continue
		}
		tv := append([]byte{t[0][0]}, t[1]...)
		if !slices.ContainsFunc(out, func(o []byte) bool { return bytes.Equal(o, tv) }) {
			out = append(out, tv)
		}
	}
	return out
}

// dOf is the d column of ev: nil (SQL NULL) unless it has a slot.
func dOf(ev *nostr.Event) []byte {
	if sl, ok := slotOf(ev); ok {
		return append([]byte{}, sl.d...)
	}
	return nil
}

const checkSQL = `SELECT
	EXISTS (SELECT 1 FROM fleetmesh.events WHERE id = $1),
	(SELECT pubkey FROM fleetmesh.deleted_ids WHERE id = $1),
	(SELECT up_to FROM fleetmesh.deleted_addresses WHERE pubkey = $2 AND kind = $3 AND d = $4),
	cur.serial, cur.id, cur.created_at
FROM (SELECT) one LEFT JOIN (
	SELECT serial, id, created_at FROM fleetmesh.events WHERE pubkey = $2 AND kind = $3 AND d = $4
) cur ON true`

const insertSQL = `WITH e AS (
	INSERT INTO fleetmesh.events (id, pubkey, created_at, kind, d, expiration, raw)
	VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING serial
)
INSERT INTO fleetmesh.tags (serial, tv, created_at) SELECT e.serial, tv, $3 FROM e, unnest($8::bytea[]) tv`

// save runs Save's transaction on conn in three round trips: the locks
// and every check; the writes; the feed and the commit.
func (s *Store) save(ctx context.Context, conn *pgxpool.Conn, ev *nostr.Event) (eventstore.Result, error) {
	sl, hasSlot := slotOf(ev)
	locks := []int64{idLock(ev.ID)}
	if hasSlot {
		locks = append(locks, sl.lock())
	}
	var del deletion
	if ev.Kind == nostr.KindDeletion {
		del = deletionOf(ev)
		for _, id := range del.ids {
			locks = append(locks, idLock([32]byte(id)))
		}
		for _, a := range del.slots {
			locks = append(locks, a.lock())
		}
	}
	// Every transaction takes its locks in one order, so none waits for
	// another that waits for it.
	slices.Sort(locks)
	locks = slices.Compact(locks)

	d := dOf(ev)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::bigint[]) AS k", locks)
	b.Queue(checkSQL, ev.ID[:], ev.PubKey[:], ev.Kind, d)
	br := conn.SendBatch(ctx, b)
	var (
		dup                   bool
		delBy, curID          []byte
		upTo, curSerial, curT *int64
	)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&dup, &delBy, &upTo, &curSerial, &curID, &curT)
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return 0, err
	}
	refuse := func(r eventstore.Result) (eventstore.Result, error) {
		_, err := conn.Exec(ctx, "ROLLBACK")
		return r, err
	}
	switch {
	case dup:
		return refuse(eventstore.Duplicate)
	case delBy != nil && bytes.Equal(delBy, ev.PubKey[:]):
		return refuse(eventstore.Deleted)
	case hasSlot && upTo != nil && ev.CreatedAt <= *upTo:
		return refuse(eventstore.Deleted)
	case curSerial != nil && (*curT > ev.CreatedAt || (*curT == ev.CreatedAt && bytes.Compare(curID, ev.ID[:]) < 0)):
		// NIP-01: the newest wins; on a tie, the lowest id.
		return refuse(eventstore.Superseded)
	}
	// A save that writes nothing is answered even at the bound.
	if m := s.opts.MaxBytes; m > 0 && s.size.Load() >= m {
		if _, err := refuse(0); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w: the database holds %d bytes, storage_max_bytes is %d", ErrFull, s.size.Load(), m)
	}

	raw := ev.AppendJSON(nil)
	var exp *int64
	if e, ok := ev.Expiration(); ok {
		exp = &e
	}
	var changes changeList
	b = &pgx.Batch{}
	nReplaced := 0
	if curSerial != nil {
		b.Queue("DELETE FROM fleetmesh.events WHERE serial = $1 RETURNING id", *curSerial)
		nReplaced = 1
	}
	b.Queue(insertSQL, ev.ID[:], ev.PubKey[:], ev.CreatedAt, ev.Kind, d, exp, raw, tagValues(ev))
	if len(del.ids) > 0 {
		// The tombstone names the last author to ask, as the Pebble store's does.
		b.Queue(`INSERT INTO fleetmesh.deleted_ids (id, pubkey) SELECT unnest($1::bytea[]), $2
			ON CONFLICT (id) DO UPDATE SET pubkey = EXCLUDED.pubkey`, del.ids, ev.PubKey[:])
		b.Queue("DELETE FROM fleetmesh.events WHERE id = ANY($1::bytea[]) AND pubkey = $2 AND kind <> 5 RETURNING id", del.ids, ev.PubKey[:])
	}
	for _, a := range del.slots {
		b.Queue(`INSERT INTO fleetmesh.deleted_addresses (pubkey, kind, d, up_to) VALUES ($1, $2, $3, $4)
			ON CONFLICT (pubkey, kind, d) DO UPDATE SET up_to = greatest(deleted_addresses.up_to, EXCLUDED.up_to)`,
			a.pubkey[:], a.kind, []byte(a.d), ev.CreatedAt)
		b.Queue("DELETE FROM fleetmesh.events WHERE pubkey = $1 AND kind = $2 AND d = $3 AND created_at <= $4 RETURNING id",
			a.pubkey[:], a.kind, []byte(a.d), ev.CreatedAt)
	}
	br = conn.SendBatch(ctx, b)
	removed := func() error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var id []byte
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			changes.removed(id)
		}
		rows.Close()
		return rows.Err()
	}
	err = nil
	if nReplaced > 0 {
		err = removed()
	}
	if err == nil {
		_, err = br.Exec()
		changes.stored(ev.ID[:], raw)
	}
	if err == nil && len(del.ids) > 0 {
		if _, err = br.Exec(); err == nil {
			err = removed()
		}
	}
	for range del.slots {
		if err == nil {
			if _, err = br.Exec(); err == nil {
				err = removed()
			}
		}
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return 0, err
	}
	if err := s.commitChanges(ctx, conn, &changes); err != nil {
		return 0, err
	}
	return eventstore.Stored, nil
}
