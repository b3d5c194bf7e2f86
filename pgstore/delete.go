package pgstore

import (
	"context"
	"fmt"
)

// MaxDeleteIDs bounds the ids one Delete call removes, as the Pebble
// store's does.
const MaxDeleteIDs = 1000

// Delete removes the stored events among ids, in one transaction, and
// returns how many it removed; ids not stored are skipped. It leaves no
// tombstone, so an event deleted here and saved again is stored again: it
// is the mesh's hand-off of shards the node no longer holds
// (spec/mesh-placement.md); NIP-09 deletion requests are Save's.
func (s *Store) Delete(ctx context.Context, ids [][32]byte) (int, error) {
	if len(ids) > MaxDeleteIDs {
		return 0, fmt.Errorf("pgstore: delete %d ids at once, at most %d", len(ids), MaxDeleteIDs)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if s.closed() {
		return 0, ErrClosed
	}
	n, err := s.removeWhere(ctx, "DELETE FROM fleetmesh.events WHERE id = ANY($1::bytea[]) RETURNING id", bytesList(ids))
	if err != nil {
		return 0, fmt.Errorf("pgstore: delete: %w", err)
	}
	return n, nil
}

// maxSweep bounds how many expired events one sweep transaction removes.
const maxSweep = 10_000

// SweepExpired removes events whose NIP-40 expiration has passed (queries
// already leave them out), at most maxSweep a call, and returns how many
// it removed. The store runs it every Options.SweepEvery; several
// processes sweeping at once skip each other's rows.
func (s *Store) SweepExpired(ctx context.Context) (int, error) {
	n, err := s.removeWhere(ctx, `DELETE FROM fleetmesh.events WHERE serial IN (
		SELECT serial FROM fleetmesh.events WHERE expiration <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED
	) RETURNING id`, s.opts.Now().Unix(), maxSweep)
	if err != nil {
		return 0, fmt.Errorf("pgstore: expiration sweep: %w", err)
	}
	return n, nil
}

// removeWhere runs a DELETE ... RETURNING id in a transaction that also
// appends a removal to the feed for each row it removed.
func (s *Store) removeWhere(ctx context.Context, sql string, args ...any) (int, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return 0, err
	}
	fail := func(err error) (int, error) {
		conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		return 0, err
	}
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return fail(err)
	}
	var l changeList
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fail(err)
		}
		l.removed(id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if err := s.commitChanges(ctx, conn, &l); err != nil {
		return fail(err)
	}
	return len(l.ops), nil
}
