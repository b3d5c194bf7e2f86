package store

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"fleetmesh.org/fleetmesh/nostr"
)

// maxRanges bounds how many index ranges one filter is split into (for
// example authors × kinds); past it the planner picks a coarser index.
const maxRanges = 256

// Query calls fn with each stored event that matches f, newest first, at
// most limit of them (limit <= 0 means none). It stops early when fn
// returns false or the scan bound is reached.
func (s *Store) Query(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event) bool) error {
	if limit <= 0 || f.Empty() || f.Search != "" {
		return nil
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return errNoDB
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	now := s.opts.Now().Unix()
	emitted := 0
	emit := func(ev *nostr.Event) bool {
		if exp, ok := ev.Expiration(); ok && exp <= now {
			return true
		}
		if !f.Matches(ev) {
			return true
		}
		emitted++
		return fn(ev) && emitted < limit
	}
	if f.IDs != nil {
		return s.queryIDs(ctx, snap, f, emit)
	}
	return s.scan(ctx, snap, plan(f), f, emit)
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

func (s *Store) queryIDs(ctx context.Context, snap *pebble.Snapshot, f *nostr.Filter, emit func(*nostr.Event) bool) error {
	var found []*nostr.Event
	seen := make(map[[32]byte]struct{}, len(f.IDs))
	for _, id := range f.IDs {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if err := ctx.Err(); err != nil {
			return err
		}
		sk, c, err := snap.Get(idKey(id))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		serial := binary.BigEndian.Uint64(sk)
		c.Close()
		ev, err := loadSnap(snap, serial)
		if err != nil {
			return err
		}
		if ev != nil {
			found = append(found, ev)
		}
	}
	slices.SortFunc(found, newestFirst)
	for _, ev := range found {
		if !emit(ev) {
			break
		}
	}
	return nil
}

func newestFirst(a, b *nostr.Event) int {
	if a.CreatedAt != b.CreatedAt {
		return int(b.CreatedAt - a.CreatedAt)
	}
	return slices.Compare(a.ID[:], b.ID[:])
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

// cursor walks one index range backwards.
type cursor struct {
	it     *pebble.Iterator
	ts     uint64
	serial uint64
}

func (c *cursor) load() bool {
	if !c.it.Valid() {
		return false
	}
	k := c.it.Key()
	c.ts = binary.BigEndian.Uint64(k[len(k)-16:])
	c.serial = binary.BigEndian.Uint64(k[len(k)-8:])
	return true
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

func (s *Store) scan(ctx context.Context, snap *pebble.Snapshot, prefixes [][]byte, f *nostr.Filter, emit func(*nostr.Event) bool) error {
	var h cursorHeap
	defer func() {
		for _, c := range h {
			c.it.Close()
		}
	}()
	since := uint64(f.Since)
	for _, p := range prefixes {
		lower := u64(slices.Clip(p), since)
		var upper []byte
		if f.HasUntil {
			upper = u64(slices.Clip(p), uint64(f.Until)+1)
		} else {
			upper = prefixEnd(p)
		}
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		c := &cursor{it: it}
		it.Last()
		if c.load() {
			h = append(h, c)
		} else {
			it.Close()
		}
	}
	heap.Init(&h)
	var lastSerial uint64
	first := true
	// Events with the same created_at are served lowest id first (NIP-01),
	// so a limit cuts the same events on every relay. Index keys order ties
	// by serial, so candidates of one timestamp are gathered and sorted.
	var bucket []*nostr.Event
	bucketTS := uint64(0)
	flush := func() bool {
		slices.SortFunc(bucket, func(a, b *nostr.Event) int { return slices.Compare(a.ID[:], b.ID[:]) })
		for _, ev := range bucket {
			if !emit(ev) {
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
		serial, ts := c.serial, c.ts
		c.it.Prev()
		if c.load() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
			c.it.Close()
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
		ev, err := loadSnap(snap, serial)
		if err != nil {
			return err
		}
		if ev != nil {
			bucket = append(bucket, ev)
		}
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

func loadSnap(snap *pebble.Snapshot, serial uint64) (*nostr.Event, error) {
	v, c, err := snap.Get(eventKey(serial))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer c.Close()
	ev := new(nostr.Event)
	if err := decodeEvent(v, ev); err != nil {
		return nil, fmt.Errorf("store: event %d: %w", serial, err)
	}
	return ev, nil
}
