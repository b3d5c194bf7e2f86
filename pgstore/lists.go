package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"fleetmesh.org/fleetmesh/manage"
)

// manageChannel is the NOTIFY channel that tells the front-ends the
// operator's lists changed; like the feed's, its notifications carry
// nothing: manage_head's version is the data.
const manageChannel = "fleetmesh_manage"

// ManageLists is the operator's NIP-86 lists (package manage) in the
// database, in the tables manage_lists and manage_head (migration 0004),
// so every front-end of the node enforces the same bans. Each front-end
// keeps its own in-memory view (manage.Lists), rebuilt when manage_head's
// version moves; Changed wakes it on a NOTIFY, and manage.Lists reads the
// version every poll besides, the feed's pattern (doc.go).
type ManageLists struct {
	s *Store
}

var (
	_ manage.ListStore  = (*ManageLists)(nil)
	_ manage.AuthMemory = (*ManageLists)(nil)
	_ manage.Notifier   = (*ManageLists)(nil)
)

// ManageLists returns the operator's lists kept in s's database.
func (s *Store) ManageLists() *ManageLists { return &ManageLists{s: s} }

// change runs fn in a transaction that first makes manage_head's version
// larger, which takes that row's lock until the commit: changes to the
// lists, from any front-end, run one at a time, so a list's bound is
// checked against what the one before left. It notifies the front-ends
// with the commit. fn returns changed false to roll back, having found
// nothing to change, so the version does not move; change returns it.
// Errors name list.
func (m *ManageLists) change(ctx context.Context, list string, fn func(tx pgx.Tx) (changed bool, err error)) (bool, error) {
	err := pgx.BeginFunc(ctx, m.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE fleetmesh.manage_head SET version = version + 1"); err != nil {
			return err
		}
		changed, err := fn(tx)
		if err != nil {
			return err
		}
		if !changed {
			return errNothing
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, '')", manageChannel)
		return err
	})
	if errors.Is(err, errNothing) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pgstore: manage list %s: %w", list, err)
	}
	return true, nil
}

// errNothing rolls back a change that found nothing to change.
var errNothing = errors.New("pgstore: nothing to change")

// Put implements manage.ListStore.
func (m *ManageLists) Put(ctx context.Context, list string, key, value []byte, max int, clear ...string) (cleared [][]byte, err error) {
	_, err = m.change(ctx, list, func(tx pgx.Tx) (bool, error) {
		if err := m.checkFull(ctx, tx, list, key, max); err != nil {
			return false, err
		}
		cleared = make([][]byte, len(clear))
		for i, c := range clear {
			err := tx.QueryRow(ctx, "DELETE FROM fleetmesh.manage_lists WHERE list = $1 AND key = $2 RETURNING value", c, key).Scan(&cleared[i])
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return false, err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO fleetmesh.manage_lists (list, key, value) VALUES ($1, $2, $3)
			ON CONFLICT (list, key) DO UPDATE SET value = EXCLUDED.value`, list, key, value)
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	return cleared, nil
}

// PutNew implements manage.ListStore. Finding key in one of unless
// changes nothing, so it does not move the version.
func (m *ManageLists) PutNew(ctx context.Context, list string, key, value []byte, max int, unless ...string) (added bool, err error) {
	return m.change(ctx, list, func(tx pgx.Tx) (bool, error) {
		var there bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM fleetmesh.manage_lists WHERE list = ANY ($1) AND key = $2)", unless, key).Scan(&there); err != nil || there {
			return false, err
		}
		if err := m.checkFull(ctx, tx, list, key, max); err != nil {
			return false, err
		}
		_, err := tx.Exec(ctx, "INSERT INTO fleetmesh.manage_lists (list, key, value) VALUES ($1, $2, $3)", list, key, value)
		return err == nil, err
	})
}

// checkFull returns an error wrapping manage.ErrFull if list holds max
// entries (max > 0) and not key.
func (m *ManageLists) checkFull(ctx context.Context, tx pgx.Tx, list string, key []byte, max int) error {
	if max <= 0 {
		return nil
	}
	var have bool
	var n int
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM fleetmesh.manage_lists WHERE list = $1 AND key = $2),
		(SELECT count(*) FROM fleetmesh.manage_lists WHERE list = $1)`, list, key).Scan(&have, &n); err != nil {
		return err
	}
	if !have && n >= max {
		return fmt.Errorf("%w: %s holds %d entries, the limit (max_entries); remove some first", manage.ErrFull, list, max)
	}
	return nil
}

// Delete implements manage.ListStore. Removing what is not there changes
// nothing, so it does not move the version.
func (m *ManageLists) Delete(ctx context.Context, list string, key []byte) (found bool, err error) {
	return m.change(ctx, list, func(tx pgx.Tx) (bool, error) {
		tag, err := tx.Exec(ctx, "DELETE FROM fleetmesh.manage_lists WHERE list = $1 AND key = $2", list, key)
		return err == nil && tag.RowsAffected() > 0, err
	})
}

// Entries implements manage.ListStore.
func (m *ManageLists) Entries(ctx context.Context, list string, fn func(key, value []byte) error) error {
	rows, err := m.s.pool.Query(ctx, "SELECT key, value FROM fleetmesh.manage_lists WHERE list = $1 ORDER BY key", list)
	if err != nil {
		return fmt.Errorf("pgstore: manage list %s: %w", list, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return fmt.Errorf("pgstore: manage list %s: %w", list, err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Load implements manage.ListStore: the version and the lists are read in
// one REPEATABLE READ snapshot.
func (m *ManageLists) Load(ctx context.Context, fn func(list string, key, value []byte) error) (version uint64, err error) {
	err = pgx.BeginTxFunc(ctx, m.s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var v int64
		if err := tx.QueryRow(ctx, "SELECT version FROM fleetmesh.manage_head").Scan(&v); err != nil {
			return err
		}
		version = uint64(v)
		rows, err := tx.Query(ctx, "SELECT list, key, value FROM fleetmesh.manage_lists ORDER BY list, key")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				list string
				k, v []byte
			)
			if err := rows.Scan(&list, &k, &v); err != nil {
				return err
			}
			if err := fn(list, k, v); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: load the manage lists: %w", err)
	}
	return version, nil
}

// Version implements manage.ListStore.
func (m *ManageLists) Version(ctx context.Context) (uint64, error) {
	var v int64
	if err := m.s.pool.QueryRow(ctx, "SELECT version FROM fleetmesh.manage_head").Scan(&v); err != nil {
		return 0, fmt.Errorf("pgstore: manage lists' version: %w", err)
	}
	return uint64(v), nil
}

// Listening implements manage.Notifier: whether the store's listener is
// connected now, so that Changed is closed on every change made through
// any front-end.
func (m *ManageLists) Listening() bool { return m.s.listening.Load() }

// Changed implements manage.ListStore: the channel is closed on the next
// NOTIFY on fleetmesh_manage, and when the listener's connection drops or
// comes back (a notification may have been lost). The first call starts
// the listener.
func (m *ManageLists) Changed() <-chan struct{} {
	s := m.s
	s.listen.Do(func() {
		s.wg.Add(1)
		go s.listener()
	})
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	return s.listsCh
}

// Use implements manage.AuthMemory in the table manage_auth_used, shared by
// the front-ends: an authorization taken at one is refused at the others.
// Each call first deletes the rows made more than window before now.
func (m *ManageLists) Use(ctx context.Context, id [32]byte, made, now time.Time, window time.Duration) (fresh bool, err error) {
	tag, err := m.s.pool.Exec(ctx, `WITH old AS (DELETE FROM fleetmesh.manage_auth_used WHERE made < $3)
		INSERT INTO fleetmesh.manage_auth_used (id, made) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
		id[:], made.Unix(), now.Add(-window).Unix())
	if err != nil {
		return false, fmt.Errorf("pgstore: NIP-98 authorizations used: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
