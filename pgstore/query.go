package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// Raw is one stored event as a query hands it out: its JSON as stored,
// valid only during the callback that receives it.
type Raw struct {
	id, pubkey [32]byte
	createdAt  int64
	kind       int
	json       []byte
}

// ID is the event's id.
func (r *Raw) ID() [32]byte { return r.id }

// PubKey is the event's author.
func (r *Raw) PubKey() [32]byte { return r.pubkey }

// CreatedAt is the event's created_at.
func (r *Raw) CreatedAt() int64 { return r.createdAt }

// Kind is the event's kind.
func (r *Raw) Kind() int { return r.kind }

// AppendJSON appends the event's NIP-01 JSON to dst.
func (r *Raw) AppendJSON(dst []byte) []byte { return append(dst, r.json...) }

// Event decodes the event into a new one that outlives the callback.
func (r *Raw) Event() (*nostr.Event, error) {
	ev := new(nostr.Event)
	if err := ev.UnmarshalJSON(r.json); err != nil {
		return nil, fmt.Errorf("pgstore: stored event %x: %w", r.id, err)
	}
	return ev, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Query calls fn with each stored event that matches f, newest first
// (ties: lowest id first), at most limit of them (limit <= 0 means none).
// It stops early when fn returns false.
func (s *Store) Query(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event) bool) error {
	var derr error
	err := s.QueryRaw(ctx, f, limit, func(r eventstore.Raw) bool {
		ev, err := r.Event()
		if err != nil {
			derr = err
			return false
		}
		return fn(ev)
	})
	return cmp.Or(err, derr)
}

// QueryRaw is Query without decoding: fn gets each match as it is
// stored, valid only until fn returns.
func (s *Store) QueryRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error {
	if s.closed() {
		return ErrClosed
	}
	return s.query(ctx, s.pool, f, limit, true, fn)
}

// ListRaw is QueryRaw in no particular order, for callers that list a
// set rather than answer a client (a NIP-77 or mesh sync session).
func (s *Store) ListRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error {
	if s.closed() {
		return ErrClosed
	}
	return s.query(ctx, s.pool, f, limit, false, fn)
}

// QueryRawHead is QueryRaw with the feed's position in the same snapshot:
// the stored answer holds exactly the events of the changes up to head,
// so a subscription that then follows the feed from head (Follow) misses
// no event and gets none twice, however many writers commit meanwhile.
func (s *Store) QueryRawHead(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) (head uint64, err error) {
	if s.closed() {
		return 0, ErrClosed
	}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var h int64
		if err := tx.QueryRow(ctx, "SELECT seq FROM fleetmesh.feed_head").Scan(&h); err != nil {
			return err
		}
		head = uint64(h)
		return s.query(ctx, tx, f, limit, true, fn)
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: query: %w", err)
	}
	return head, nil
}

// Count returns how many stored events match f (NIP-45), counting at most
// Options.MaxScan; approximate is true when that bound cut the count short.
func (s *Store) Count(ctx context.Context, f *nostr.Filter) (n int64, approximate bool, err error) {
	if s.closed() {
		return 0, false, ErrClosed
	}
	if f.Empty() || f.Search != "" {
		return 0, false, nil
	}
	q, args := buildQuery(f, s.opts.Now().Unix(), s.opts.MaxScan, false, "1")
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM ("+q+") m", args...).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("pgstore: count: %w", err)
	}
	return n, n >= int64(s.opts.MaxScan), nil
}

func (s *Store) query(ctx context.Context, db querier, f *nostr.Filter, limit int, ordered bool, fn func(eventstore.Raw) bool) error {
	if limit <= 0 || f.Empty() || f.Search != "" {
		return nil
	}
	q, args := buildQuery(f, s.opts.Now().Unix(), limit, ordered, "e.id, e.pubkey, e.created_at, e.kind, e.raw")
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("pgstore: query: %w", err)
	}
	defer rows.Close()
	var (
		r           Raw
		id, pk, raw pgtype.DriverBytes
		kind        int32
	)
	for rows.Next() {
		if err := rows.Scan(&id, &pk, &r.createdAt, &kind, &raw); err != nil {
			return fmt.Errorf("pgstore: query: %w", err)
		}
		if len(id) != 32 || len(pk) != 32 {
			return fmt.Errorf("pgstore: query: a stored event has a %d-byte id and a %d-byte pubkey", len(id), len(pk))
		}
		r.id, r.pubkey, r.kind, r.json = [32]byte(id), [32]byte(pk), int(kind), raw
		if !fn(&r) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: query: %w", err)
	}
	return nil
}

// buildQuery writes the SELECT of cols that answers f: the conditions of
// f over the events table, events past their NIP-40 expiration left out,
// newest first (ties: lowest id) when ordered, at most limit rows.
//
// A filter with tag conditions is driven from the tags table when its
// tag with the fewest values has one value: the index tags_by_value then
// yields that tag's events newest first, and the limit stops the walk.
// Any other condition is a plain predicate whose index the planner picks
// (see the indexes of migrations/0001_schema.sql).
func buildQuery(f *nostr.Filter, now int64, limit int, ordered bool, cols string) (string, []any) {
	var (
		args  []any
		conds []string
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	conds = append(conds, "(e.expiration IS NULL OR e.expiration > "+arg(now)+")")
	if f.IDs != nil {
		conds = append(conds, "e.id = ANY("+arg(bytesList(f.IDs))+"::bytea[])")
	}
	if f.Authors != nil {
		conds = append(conds, "e.pubkey = ANY("+arg(bytesList(f.Authors))+"::bytea[])")
	}
	if f.Kinds != nil {
		ks := make([]int32, len(f.Kinds))
		for i, k := range f.Kinds {
			ks[i] = int32(k)
		}
		conds = append(conds, "e.kind = ANY("+arg(ks)+"::integer[])")
	}
	timeCol := "e.created_at"
	from := "fleetmesh.events e"
	// The tag driving the walk: the one with the fewest values, as the
	// Pebble store's planner picks, if it has exactly one.
	drive := ""
	for name, vals := range f.Tags {
		if drive == "" || len(vals) < len(f.Tags[drive]) || (len(vals) == len(f.Tags[drive]) && name < drive) {
			drive = name
		}
	}
	if drive != "" && (len(drive) != 1 || len(f.Tags[drive]) != 1 || f.IDs != nil) {
		drive = ""
	}
	if drive != "" {
		from = "fleetmesh.tags t JOIN fleetmesh.events e ON e.serial = t.serial"
		timeCol = "t.created_at"
		conds = append(conds, "t.tv = "+arg(tagValue(drive, f.Tags[drive][0])))
		if f.Since != 0 {
			conds = append(conds, "e.created_at >= "+arg(f.Since))
		}
		if f.HasUntil {
			conds = append(conds, "e.created_at <= "+arg(f.Until))
		}
	}
	if f.Since != 0 {
		conds = append(conds, timeCol+" >= "+arg(f.Since))
	}
	if f.HasUntil {
		conds = append(conds, timeCol+" <= "+arg(f.Until))
	}
	for name, vals := range f.Tags {
		if name == drive {
			continue
		}
		tvs := make([][]byte, len(vals))
		for i, v := range vals {
			tvs[i] = tagValue(name, v)
		}
		if len(name) != 1 {
			// Only single-letter tags are indexed; nothing else matches.
			conds = append(conds, "false")
			continue
		}
		conds = append(conds, "EXISTS (SELECT 1 FROM fleetmesh.tags x WHERE x.serial = e.serial AND x.tv = ANY("+arg(tvs)+"::bytea[]))")
	}
	var sb strings.Builder
	sb.WriteString("SELECT ")
	sb.WriteString(cols)
	sb.WriteString(" FROM ")
	sb.WriteString(from)
	sb.WriteString(" WHERE ")
	sb.WriteString(strings.Join(conds, " AND "))
	if ordered {
		sb.WriteString(" ORDER BY " + timeCol + " DESC, e.id")
	}
	sb.WriteString(" LIMIT " + arg(limit))
	return sb.String(), args
}

func bytesList(ids [][32]byte) [][]byte {
	out := make([][]byte, len(ids))
	for i := range ids {
		out[i] = ids[i][:]
	}
	return out
}

// tagValue is a tag's key in the tags table: the letter's byte, then the
// value's bytes.
func tagValue(name, value string) []byte {
	return append([]byte(name[:1]), value...)
}
