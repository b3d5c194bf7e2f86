package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// saveReq is one Save waiting for a writer.
type saveReq struct {
	ev   *nostr.Event
	res  eventstore.Result
	err  error
	done chan struct{}
}

// batchTimeout bounds one batch's transaction, so that a database that
// stopped answering fails the saves instead of holding them forever.
const batchTimeout = time.Minute

// writer gathers the saves waiting, up to Options.MaxBatch, and commits
// them as one transaction, until Close; then it commits those still
// queued and returns.
//
// Why batches: the feed's counter row serialises the writers of every
// front-end for the span of their commit (doc.go), so with one save per
// transaction a database's commits (an fsync each) bound the whole
// anchor's ingest. A batch shares one commit, one feed update and one
// NOTIFY among all its saves, and takes two round trips: the locks and
// every save's checks and writes (fleetmesh.save_event, pipelined), then
// the feed and the commit.
func (s *Store) writer() {
	defer s.wg.Done()
	batch := make([]*saveReq, 0, s.opts.MaxBatch)
	closing := false
	for {
		if !closing {
			select {
			case r := <-s.writes:
				batch = append(batch[:0], r)
			case <-s.bg.Done():
				closing = true
				continue
			}
		} else {
			select {
			case r := <-s.writes:
				batch = append(batch[:0], r)
			default:
				return
			}
		}
	gather:
		for len(batch) < s.opts.MaxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		s.commitBatch(batch)
	}
}

// commitBatch runs a batch and answers its saves. A batch that fails for
// any reason but a lost connection is run again one save at a time, so
// that one bad save fails alone.
func (s *Store) commitBatch(batch []*saveReq) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.bg), batchTimeout)
	defer cancel()
	// A batch that lost its connection is run again: a save that did
	// commit is then a Duplicate, which is what it is.
	err := s.retryConn(func() error { return s.runBatch(ctx, batch) }, func() bool { return true })
	if err != nil && len(batch) > 1 && !isConnError(err) {
		for _, r := range batch {
			s.commitBatch([]*saveReq{r})
		}
		return
	}
	for _, r := range batch {
		if err != nil {
			r.res, r.err = 0, fmt.Errorf("pgstore: save %s: %w", r.ev.IDHex(), err)
		}
		close(r.done)
	}
}

// isConnError reports whether err lost the connection (a network error,
// a server that ended the session: SQLSTATE classes 08 and 57, as
// pg_terminate_backend or a restart do), not a statement's error.
func isConnError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr interface{ SQLState() string }
	if !errors.As(err, &pgErr) {
		return true
	}
	class := pgErr.SQLState()[:2]
	return class == "08" || class == "57"
}

// retryConn runs fn, and again while it loses its connection and retry
// says nothing was handed out yet, up to once per connection the pool may
// hold and once more: a pooled connection that the server ended while it
// sat idle (pg_terminate_backend, a restart) fails its first use and is
// dropped, the pool pings only those idle over a second, and after all of
// them the pool dials anew.
func (s *Store) retryConn(fn func() error, retry func() bool) error {
	err := fn()
	for range s.opts.MaxConns + 1 {
		if err == nil || !isConnError(err) || !retry() {
			break
		}
		err = fn()
	}
	return err
}

// saveResults maps save_event's results to Save's.
var saveResults = map[int32]eventstore.Result{
	0: eventstore.Stored, 1: eventstore.Duplicate, 2: eventstore.Superseded, 3: eventstore.Deleted,
}

// runBatch saves a batch in one transaction, setting each save's result.
func (s *Store) runBatch(ctx context.Context, batch []*saveReq) error {
	var locks []int64
	for _, r := range batch {
		locks = append(locks, saveLocks(r.ev)...)
	}
	// Every transaction takes all its locks at its start, in one order,
	// so none waits for another that waits for it.
	slices.Sort(locks)
	locks = slices.Compact(locks)
	full := false
	if m := s.opts.MaxBytes; m > 0 && s.size.Load() >= m {
		full = true
	}

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::bigint[]) AS k", locks)
	raws := make([][]byte, len(batch))
	for i, r := range batch {
		ev := r.ev
		raws[i] = ev.AppendJSON(nil)
		var exp *int64
		if e, ok := ev.Expiration(); ok {
			exp = &e
		}
		var del deletion
		if ev.Kind == nostr.KindDeletion {
			del = deletionOf(ev)
		}
		kinds := make([]int32, len(del.slots))
		ds := make([][]byte, len(del.slots))
		for i, sl := range del.slots {
			kinds[i], ds[i] = int32(sl.kind), []byte(sl.d)
		}
		b.Queue("SELECT result, replaced, deleted FROM fleetmesh.save_event($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
			ev.ID[:], ev.PubKey[:], ev.CreatedAt, ev.Kind, dOf(ev), exp, raws[i], tagValues(ev),
			del.ids, kinds, ds, full)
	}
	var changes changeList
	err = func() error {
		br := conn.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		for i, r := range batch {
			var (
				res      int32
				replaced []byte
				deleted  [][]byte
			)
			if err := br.QueryRow().Scan(&res, &replaced, &deleted); err != nil {
				return err
			}
			if res == -1 {
				r.err = fmt.Errorf("pgstore: save %s: %w: the database holds %d bytes, storage_max_bytes is %d", r.ev.IDHex(), ErrFull, s.size.Load(), s.opts.MaxBytes)
				continue
			}
			rr, ok := saveResults[res]
			if !ok {
				return fmt.Errorf("save_event answered %d", res)
			}
			r.res = rr
			if replaced != nil {
				changes.removed(replaced)
			}
			if rr == eventstore.Stored {
				changes.stored(r.ev.ID[:], raws[i])
			}
			for _, id := range deleted {
				changes.removed(id)
			}
		}
		return br.Close()
	}()
	if err == nil {
		err = s.commitChanges(ctx, conn, &changes)
	}
	if err != nil {
		// A transaction left open by a failed batch is rolled back; the
		// pool drops a connection still in one when it comes back.
		conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		for _, r := range batch {
			r.res, r.err = 0, nil
		}
		return err
	}
	return nil
}

// saveLocks lists the advisory lock keys a save takes: its id's, its
// slot's, and a deletion request's ids' and addresses'.
func saveLocks(ev *nostr.Event) []int64 {
	locks := []int64{idLock(ev.ID)}
	if sl, ok := slotOf(ev); ok {
		locks = append(locks, sl.lock())
	}
	if ev.Kind == nostr.KindDeletion {
		del := deletionOf(ev)
		for _, id := range del.ids {
			locks = append(locks, idLock([32]byte(id)))
		}
		for _, a := range del.slots {
			locks = append(locks, a.lock())
		}
	}
	return locks
}
