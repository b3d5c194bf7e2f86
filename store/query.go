package store

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// maxRanges bounds how many index ranges one filter is split into (for
// example authors × kinds); past it the planner picks a coarser index.
const maxRanges = 256

// Query calls fn with each stored event that matches f, newest first, at
// most limit of them (limit <= 0 means none). It stops early when fn
// returns false or the scan bound is reached.
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

// QueryRaw is Query without decoding: fn gets each match as it is stored,
// valid only until fn returns, so that a caller who only writes the events
// out (a relay answering a REQ) pays for no nostr.Event.
func (s *Store) QueryRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error {
	if limit <= 0 || f.Empty() || f.Search != "" {
		return nil
	}
	epoch, err := s.beginRead()
	if err != nil {
		return err
	}
	defer s.endRead(epoch)
	snap := s.db.NewSnapshot()
	defer snap.Close()
	now := s.opts.Now().Unix()
	emitted := 0
	emit := func(r *Raw) bool {
		if exp, ok := r.expiration(); ok && exp <= now {
			return true
		}
		if !r.matches(f) {
			return true
		}
		emitted++
		return fn(r) && emitted < limit
	}
	if f.IDs != nil {
		return s.queryIDs(ctx, snap, f, emit)
	}
	return s.scan(ctx, snap, plan(f), f, limit, emit)
}

// beginRead starts a read of the database and the records: it holds
// dbMu shared (a failed commit's reopen waits for it) and an epoch of the
// records (no segment the read may name is removed), until endRead. It
// must come before the read takes its snapshot.
func (s *Store) beginRead() (epoch uint64, err error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return 0, ErrClosed
	}
	s.dbMu.RLock()
	if s.db == nil {
		s.dbMu.RUnlock()
		return 0, errNoDB
	}
	return s.rec.enter(), nil
}

// endRead ends what beginRead began.
func (s *Store) endRead(epoch uint64) {
	s.rec.leave(epoch)
	s.dbMu.RUnlock()
}

// Count returns how many stored events match f (NIP-45), examining at most
// the scan bound; approximate is true when the bound cut the count short.
func (s *Store) Count(ctx context.Context, f *nostr.Filter) (n int64, approximate bool, err error) {
	scanned := 0
	err = s.Query(ctx, f, s.opts.MaxScan, func(*nostr.Event) bool {
		n++
		scanned++
		return true
	})
	return n, scanned >= s.opts.MaxScan, err
}

func (s *Store) queryIDs(ctx context.Context, snap *pebble.Snapshot, f *nostr.Filter, emit func(*Raw) bool) error {
	var found []Raw
	seen := make(map[[32]byte]struct{}, len(f.IDs))
	for _, id := range f.IDs {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if err := ctx.Err(); err != nil {
			return err
		}
		v, c, err := snap.Get(idKey(id))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		lc, okLoc := parseLoc(v[min(8, len(v)):])
		serial := binary.BigEndian.Uint64(v)
		c.Close()
		if !okLoc {
			return fmt.Errorf("%w: the id key of event %d holds %d bytes, not a serial and a location", errBadFrame, serial, len(v))
		}
		var r Raw
		if err := s.loadRaw(serial, lc, &r); err != nil {
			return err
		}
		found = append(found, r)
	}
	slices.SortFunc(found, rawNewestFirst)
	for i := range found {
		if !emit(&found[i]) {
			break
		}
	}
	return nil
}

// newestFirst is NIP-01's order: newest first, ties by lowest id.
func newestFirst(a, b *nostr.Event) int {
	if a.CreatedAt != b.CreatedAt {
		return cmp.Compare(b.CreatedAt, a.CreatedAt)
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// rawNewestFirst is newestFirst on stored records.
func rawNewestFirst(a, b Raw) int {
	if a.createdAt != b.createdAt {
		return cmp.Compare(b.createdAt, a.createdAt)
	}
	return bytes.Compare(a.rec[:32], b.rec[:32])
}

// plan chooses the key prefixes whose ranges hold every match of f. The
// most selective index the filter allows wins: author+kind, then a tag,
// then author, then kind, then time alone.
func plan(f *nostr.Filter) [][]byte {
	var prefixes [][]byte
	switch {
	case f.Authors != nil && f.Kinds != nil && len(f.Authors)*len(f.Kinds) <= maxRanges:
		for _, a := range f.Authors {
			for _, k := range f.Kinds {
				prefixes = append(prefixes, u16(append([]byte{pAuthorKind}, a[:]...), k))
			}
		}
	case len(f.Tags) > 0:
		// The tag with the fewest values gives the fewest ranges.
		var best string
		for name, vals := range f.Tags {
			if best == "" || len(vals) < len(f.Tags[best]) || (len(vals) == len(f.Tags[best]) && name < best) {
				best = name
			}
		}
		if len(best) == 1 && len(f.Tags[best]) <= maxRanges {
			for _, v := range f.Tags[best] {
				prefixes = append(prefixes, tagPrefix(best[0], v))
			}
			break
		}
		fallthrough
	case f.Authors != nil && len(f.Authors) <= maxRanges:
		for _, a := range f.Authors {
			prefixes = append(prefixes, append([]byte{pAuthor}, a[:]...))
		}
	case f.Kinds != nil && len(f.Kinds) <= maxRanges:
		for _, k := range f.Kinds {
			prefixes = append(prefixes, u16([]byte{pKind}, k))
		}
	default:
		prefixes = [][]byte{{pCreated}}
	}
	return prefixes
}

// cursor walks one index range [lower, upper) backwards. All the cursors
// of a query share one Pebble iterator (a query may merge 150 ranges, and
// building, positioning and closing an iterator per range was a third of
// a REQ's CPU on a million events): a cursor reads its range's keys in
// chunks into buf, seeking the shared iterator back to where its last
// chunk ended.
type cursor struct {
	lower, upper []byte
	resume       []byte // the last key read; the next chunk starts below it
	buf          []entry
	pos          int
	chunk        int
	done         bool // the range has no keys below resume
	ts, serial   uint64
	lc           loc
	err          error // a key whose value is not a location
}

type entry struct {
	ts, serial uint64
	lc         loc
}

// maxChunk bounds one refill of a cursor.
const maxChunk = 256

// next moves the cursor to its next (older) entry; false when the range
// is exhausted.
func (c *cursor) next(it *pebble.Iterator) bool {
	if c.pos == len(c.buf) {
		if c.done {
			return false
		}
		c.refill(it)
		if len(c.buf) == 0 {
			return false
		}
	}
	e := c.buf[c.pos]
	c.pos++
	c.ts, c.serial, c.lc = e.ts, e.serial, e.lc
	return true
}

func (c *cursor) refill(it *pebble.Iterator) {
	c.buf, c.pos = c.buf[:0], 0
	seek := c.upper
	if c.resume != nil {
		seek = c.resume
	}
	ok := it.SeekLT(seek)
	for ; ok && len(c.buf) < c.chunk; ok = it.Prev() {
		k := it.Key()
		if bytes.Compare(k, c.lower) < 0 || len(k) != len(c.lower)+8 {
			ok = false
			break
		}
		e := entry{ts: binary.BigEndian.Uint64(k[len(k)-16:]), serial: binary.BigEndian.Uint64(k[len(k)-8:])}
		var okLoc bool
		if e.lc, okLoc = parseLoc(it.Value()); !okLoc && c.err == nil {
			c.err = fmt.Errorf("%w: index key %x holds %d bytes, not a location", errBadFrame, k, len(it.Value()))
		}
		c.buf = append(c.buf, e)
		c.resume = append(c.resume[:0], k...)
	}
	c.done = !ok
	c.chunk = min(2*c.chunk, maxChunk)
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if h[i].ts != h[j].ts {
		return h[i].ts > h[j].ts
	}
	return h[i].serial > h[j].serial
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

func (s *Store) scan(ctx context.Context, snap *pebble.Snapshot, prefixes [][]byte, f *nostr.Filter, limit int, emit func(*Raw) bool) error {
	since := uint64(f.Since)
	var h cursorHeap
	var lo, hi []byte
	// A first chunk of about twice each range's share of the limit: most
	// ranges of a 50-author feed hold a few of its events, one kind's range
	// holds all of them.
	chunk := min(max(2*limit/len(prefixes), 4), maxChunk)
	// In key order, the first seeks of consecutive ranges often land in the
	// table files the previous one opened.
	slices.SortFunc(prefixes, bytes.Compare)
	for _, p := range prefixes {
		c := &cursor{lower: u64(slices.Clip(p), since), chunk: chunk}
		if f.HasUntil {
			c.upper = u64(slices.Clip(p), uint64(f.Until)+1)
		} else {
			c.upper = prefixEnd(p)
		}
		if lo == nil || bytes.Compare(c.lower, lo) < 0 {
			lo = c.lower
		}
		if hi == nil || (c.upper != nil && bytes.Compare(c.upper, hi) > 0) {
			hi = c.upper
		}
		h = append(h, c)
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer it.Close()
	live := h[:0]
	for _, c := range h {
		if c.next(it) {
			live = append(live, c)
		}
	}
	h = live
	heap.Init(&h)
	var lastSerial uint64
	first := true
	// Events with the same created_at are served lowest id first (NIP-01),
	// so a limit cuts the same events on every relay. Index keys order ties
	// by serial, so candidates of one timestamp are gathered and sorted.
	var bucket []Raw
	bucketTS := uint64(0)
	flush := func() bool {
		if len(bucket) > 1 {
			slices.SortFunc(bucket, rawNewestFirst)
		}
		for i := range bucket {
			if !emit(&bucket[i]) {
				return false
			}
		}
		bucket = bucket[:0]
		return true
	}
	for scanned := 0; h.Len() > 0 && scanned < s.opts.MaxScan; scanned++ {
		if scanned%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		c := h[0]
		if c.err != nil {
			return c.err
		}
		serial, ts, lc := c.serial, c.ts, c.lc
		if c.next(it) {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
		// Ranges of different tag values can hold the same event; they
		// surface next to each other because the merge is ordered.
		if !first && serial == lastSerial {
			continue
		}
		first, lastSerial = false, serial
		if ts != bucketTS && !flush() {
			return nil
		}
		bucketTS = ts
		var r Raw
		if err := s.loadRaw(serial, lc, &r); err != nil {
			return err
		}
		bucket = append(bucket, r)
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	flush()
	return nil
}

// prefixEnd is the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// loadRaw reads event serial's record at lc into r. The caller holds an
// epoch of s.rec from before it took the snapshot that gave it lc.
func (s *Store) loadRaw(serial uint64, lc loc, r *Raw) error {
	rec, err := s.rec.read(lc, serial, nil)
	if err != nil {
		return err
	}
	if err := r.view(rec); err != nil {
		return fmt.Errorf("store: event %d: %w", serial, err)
	}
	return nil
}
