package store

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// ListRaw is QueryRaw without the order, for callers that list a set
// rather than answer a client (a NIP-77 or mesh sync session, which sorts
// the items itself): fn gets each stored event that matches f, at most
// limit of them in no particular order, and ListRaw stops early when fn
// returns false or the scan bound is reached.
//
// A filter that names nothing (no ids, authors, kinds, tags, since or
// until: the whole store) is served by one pass over the event records in
// storage order, with no index walk and no point read per event, which is
// most of QueryRaw's cost for such a filter. Any other filter is
// QueryRaw's, whose indexes serve it better than reading every record.
func (s *Store) ListRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error {
	if !wholeStore(f) {
		return s.QueryRaw(ctx, f, limit, fn)
	}
	if limit <= 0 {
		return nil
	}
	epoch, err := s.beginRead()
	if err != nil {
		return err
	}
	defer s.endRead(epoch)
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{pEvent}, UpperBound: []byte{pEvent + 1}})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer it.Close()
	now := s.opts.Now().Unix()
	emitted := 0
	var buf []byte
	for ok, scanned := it.First(), 0; ok && scanned < s.opts.MaxScan; ok, scanned = it.Next(), scanned+1 {
		if scanned%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		// One buffer serves every record: a Raw is valid only until fn
		// returns.
		lc, okLoc := parseLoc(it.Value())
		if !okLoc {
			return fmt.Errorf("%w: event key %x holds %d bytes, not a location", errBadFrame, it.Key(), len(it.Value()))
		}
		rec, err := s.rec.read(lc, binary.BigEndian.Uint64(it.Key()[1:]), &buf)
		if err != nil {
			return err
		}
		var r Raw
		if err := r.view(rec); err != nil {
			return fmt.Errorf("store: event record %x: %w", it.Key(), err)
		}
		if exp, ok := r.expiration(); ok && exp <= now {
			continue
		}
		emitted++
		if !fn(&r) || emitted >= limit {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// wholeStore says whether f names nothing that an index could serve.
func wholeStore(f *nostr.Filter) bool {
	return f.IDs == nil && f.Authors == nil && f.Kinds == nil && len(f.Tags) == 0 &&
		f.Since == 0 && !f.HasUntil && f.Search == ""
}
