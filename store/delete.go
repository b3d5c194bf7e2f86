package store

import (
	"context"
	"encoding/binary"
	"fmt"
)

// MaxDeleteIDs bounds the ids one Delete call removes, so that one batch
// (and the writer's time away from saves) stays small.
const MaxDeleteIDs = 1000

// deleteReq asks the writer to remove events by id.
type deleteReq struct {
	ids  [][32]byte
	n    int
	err  error
	done chan struct{}
}

// Delete removes the stored events among ids, in one batch committed
// durably, and returns how many it removed; ids not stored are skipped.
// It leaves no tombstone, so an event deleted here and saved again is
// stored again. It is for the node's hand-off of the shards it no longer
// holds (spec/mesh-placement.md), whose events other nodes hold; NIP-09
// deletion requests are Save's. At most MaxDeleteIDs ids per call.
func (s *Store) Delete(ctx context.Context, ids [][32]byte) (int, error) {
	if len(ids) > MaxDeleteIDs {
		return 0, fmt.Errorf("store: delete %d ids at once, at most %d", len(ids), MaxDeleteIDs)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	req := &deleteReq{ids: ids, done: make(chan struct{})}
	if err := toWriter(ctx, s, s.deletes, req, req.done); err != nil {
		return 0, err
	}
	return req.n, req.err
}

// delete runs a deleteReq on the writer goroutine: all of its removals
// commit together or none does.
func (s *Store) delete(req *deleteReq) {
	defer close(req.done)
	if err := s.writable(); err != nil {
		req.err = err
		return
	}
	b := s.db.NewIndexedBatch()
	defer b.Close()
	defer s.rec.abort()
	n := 0
	for _, id := range req.ids {
		sk, err := get(b, idKey(id))
		if err != nil {
			req.err = fmt.Errorf("store: delete: %w", err)
			return
		}
		if sk == nil {
			continue // not stored, or already removed earlier in this batch
		}
		serial := binary.BigEndian.Uint64(sk)
		ev, err := s.loadFrom(b, serial)
		if err != nil {
			req.err = fmt.Errorf("store: delete: %w", err)
			return
		}
		if err := s.remove(b, ev, serial); err != nil {
			req.err = fmt.Errorf("store: delete: %w", err)
			return
		}
		n++
	}
	if n == 0 {
		return
	}
	if err := s.commitBatch(b); err != nil {
		s.recover(err)
		req.err = err
		return
	}
	req.n = n
}
