package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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

// tagWalkSetting is what a query that walks a tag's index runs first in
// its transaction (query).
const tagWalkSetting = "SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true)"

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
	return s.queryRetry(ctx, f, limit, true, fn)
}

// queryRetry is query on the read pool, run again if its connection was
// lost before it handed out any event (retryConn).
func (s *Store) queryRetry(ctx context.Context, f *nostr.Filter, limit int, ordered bool, fn func(eventstore.Raw) bool) error {
	handed := false
	return s.retryConn(func() error {
		return s.query(ctx, s.read, f, limit, ordered, func(r eventstore.Raw) bool {
			handed = true
			return fn(r)
		})
	}, func() bool { return !handed })
}

// ListRaw is QueryRaw in no particular order, for callers that list a
// set rather than answer a client (a NIP-77 or mesh sync session).
func (s *Store) ListRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error {
	if s.closed() {
		return ErrClosed
	}
	return s.queryRetry(ctx, f, limit, false, fn)
}

// QueryRawHead is QueryRaw with the feed's position in the same snapshot:
// the stored answer holds exactly the events of the changes up to head,
// so a subscription that then follows the feed from head (Follow) misses
// no event and gets none twice, however many writers commit meanwhile.
func (s *Store) QueryRawHead(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) (head uint64, err error) {
	if s.closed() {
		return 0, ErrClosed
	}
	err = pgx.BeginTxFunc(ctx, s.read, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
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
	q, args, _ := buildQuery(f, s.opts.Now().Unix(), s.opts.MaxScan, false, "1")
	if err := s.retryConn(func() error {
		return s.read.QueryRow(ctx, "SELECT count(*) FROM ("+q+") m", args...).Scan(&n)
	}, func() bool { return true }); err != nil {
		return 0, false, fmt.Errorf("pgstore: count: %w", err)
	}
	return n, n >= int64(s.opts.MaxScan), nil
}

func (s *Store) query(ctx context.Context, db querier, f *nostr.Filter, limit int, ordered bool, fn func(eventstore.Raw) bool) error {
	if limit <= 0 || f.Empty() || f.Search != "" {
		return nil
	}
	q, args, tagWalk := buildQuery(f, s.opts.Now().Unix(), limit, ordered, "e.id, e.pubkey, e.created_at, e.kind, e.raw")
	if tagWalk {
		// A tag's walk is planned for an average value (the value comes
		// from unnest()) and on statistics that may be stale (a young
		// database, a tag catching on): a handful of rows, so PostgreSQL
		// preferred reading all of the tag's rows (a bitmap scan, or a
		// hash join with the kind's events) and sorting them to the index
		// walk in answer order that stops at the limit, and a popular
		// hashtag's REQ read every row of it. Without sorts and bitmap
		// scans, for this query only, the ordered walk is the plan; and
		// without JIT, which the disabled sort's cost penalty would
		// otherwise call in to compile the query (about 175 ms, where
		// the walk takes under 1).
		tx, ok := db.(pgx.Tx)
		if !ok {
			return pgx.BeginTxFunc(ctx, s.read, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
				return s.query(ctx, tx, f, limit, ordered, fn)
			})
		}
		if _, err := tx.Exec(ctx, tagWalkSetting); err != nil {
			return fmt.Errorf("pgstore: query: %w", err)
		}
	}
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

// maxLateral bounds how many index walks one query is split into (for
// example authors × kinds), as the Pebble store's maxRanges does; past it
// the planner gets the plain predicate.
const maxLateral = 256

// buildQuery writes the SELECT of cols that answers f: the conditions of
// f over the events table, events past their NIP-40 expiration left out,
// at most limit rows, newest first (ties: lowest id) when ordered.
//
// An ordered query is split as the Pebble store's planner splits it into
// key ranges: by (author, kind) pairs, else by the values of the tag with
// the fewest, else by author, else by kind. Each part is a LATERAL
// subquery that walks one index (events_by_author_kind, tags_by_value_time_id,
// events_by_author, events_by_kind) newest first and stops at the limit,
// and the outer query merges the parts. PostgreSQL 15 cannot walk an
// index in order for "= ANY(list)", so without the split a 50-author
// feed sorts every note of the 50 authors to return 50 of them.
func buildQuery(f *nostr.Filter, now int64, limit int, ordered bool, cols string) (q string, args []any, tagWalk bool) {
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	authors, kinds := dedup(bytesList(f.Authors)), dedupInts(f.Kinds)
	// The part of the query each LATERAL walk takes: "authorkind",
	// "tag", "author", "kind", or "" for none.
	drive := ""
	best := ""
	for name, vals := range f.Tags {
		if best == "" || len(vals) < len(f.Tags[best]) || (len(vals) == len(f.Tags[best]) && name < best) {
			best = name
		}
	}
	switch {
	case !ordered || f.IDs != nil:
	case f.Authors != nil && f.Kinds != nil && len(authors)*len(kinds) <= maxLateral:
		drive = "authorkind"
	case best != "" && len(best) == 1 && len(f.Tags[best]) <= maxLateral:
		drive = "tag"
	case f.Authors != nil && len(authors) <= maxLateral:
		drive = "author"
	case f.Kinds != nil && len(kinds) <= maxLateral:
		drive = "kind"
	}

	conds := []string{"(e.expiration IS NULL OR e.expiration > " + arg(now) + ")"}
	if f.IDs != nil {
		conds = append(conds, "e.id = ANY("+arg(bytesList(f.IDs))+"::bytea[])")
	}
	var outer string // the FROM items the walks are laterally joined to
	from := "fleetmesh.events e"
	timeCol := "e.created_at"
	switch drive {
	case "authorkind":
		outer = "unnest(" + arg(authors) + "::bytea[]) AS a(v) CROSS JOIN unnest(" + arg(kinds) + "::integer[]) AS k(v)"
		conds = append(conds, "e.pubkey = a.v", "e.kind = k.v")
	case "author":
		outer = "unnest(" + arg(authors) + "::bytea[]) AS a(v)"
		conds = append(conds, "e.pubkey = a.v")
	case "kind":
		outer = "unnest(" + arg(kinds) + "::integer[]) AS k(v)"
		conds = append(conds, "e.kind = k.v")
	case "tag":
		from = "fleetmesh.tags t JOIN fleetmesh.events e ON e.serial = t.serial"
		timeCol = "t.created_at"
		// The walks and their condition on t.tv are written below.
	}
	if f.Authors != nil && drive != "authorkind" && drive != "author" {
		conds = append(conds, "e.pubkey = ANY("+arg(authors)+"::bytea[])")
	}
	if f.Kinds != nil && drive != "authorkind" && drive != "kind" {
		conds = append(conds, "e.kind = ANY("+arg(kinds)+"::integer[])")
	}
	if f.Since != 0 {
		conds = append(conds, timeCol+" >= "+arg(f.Since))
	}
	if f.HasUntil {
		conds = append(conds, timeCol+" <= "+arg(f.Until))
	}
	for name, vals := range f.Tags {
		if drive == "tag" && name == best {
			continue
		}
		if len(name) != 1 {
			// Only single-letter tags are indexed, and a filter names
			// no other (nostr.Filter).
			conds = append(conds, "false")
			continue
		}
		conds = append(conds, "EXISTS (SELECT 1 FROM fleetmesh.tags x WHERE x.serial = e.serial AND x.tv = ANY("+arg(tagValues1(name, vals))+"::bytea[]))")
	}
	lim := arg(limit)
	var sb strings.Builder
	if drive == "" {
		sb.WriteString("SELECT " + cols + " FROM " + from + " WHERE " + strings.Join(conds, " AND "))
		if ordered {
			sb.WriteString(" ORDER BY e.created_at DESC, e.id")
		}
		sb.WriteString(" LIMIT " + lim)
		return sb.String(), args, false
	}
	// Values of one tag can name the same event twice.
	distinct := ""
	if drive == "tag" && len(f.Tags[best]) > 1 {
		distinct = "DISTINCT ON (e.created_at, e.id) "
	}
	if drive == "tag" {
		outer = "unnest(" + arg(tagValues1(best, f.Tags[best])) + "::bytea[]) AS t0(v)"
		conds = append(conds, "t.tv = t0.v")
	}
	sb.WriteString("SELECT " + distinct + cols + " FROM " + outer + " CROSS JOIN LATERAL (")
	sb.WriteString("SELECT e.* FROM " + from + " WHERE " + strings.Join(conds, " AND "))
	idCol := "e.id"
	if drive == "tag" {
		idCol = "t.id" // tags_by_value_time_id's order
	}
	sb.WriteString(" ORDER BY " + timeCol + " DESC, " + idCol + " LIMIT " + lim + ") e")
	sb.WriteString(" ORDER BY e.created_at DESC, e.id LIMIT " + lim)
	return sb.String(), args, drive == "tag"
}

// dedup drops repeated values, so that no two walks cover one range.
func dedup(l [][]byte) [][]byte {
	out := l[:0:0]
	seen := make(map[string]bool, len(l))
	for _, b := range l {
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	return out
}

func dedupInts(l []int) []int32 {
	out := make([]int32, 0, len(l))
	for _, k := range l {
		if !slices.Contains(out, int32(k)) {
			out = append(out, int32(k))
		}
	}
	return out
}

func tagValues1(name string, vals []string) [][]byte {
	tvs := make([][]byte, 0, len(vals))
	for _, v := range vals {
		tvs = append(tvs, tagValue(name, v))
	}
	return dedup(tvs)
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
