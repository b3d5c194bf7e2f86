package frontend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Heartbeat is how often a front-end renews its row in the members
// table; a row not renewed for three heartbeats is shown as stale and
// removed by the next front-end that starts.
const Heartbeat = 5 * time.Second

// schemaLock is the advisory lock key under which the members table is
// created, so that front-ends starting together do not race on it.
const schemaLock int64 = 0x666d66726f6e7473 // "fmfronts"

const createMembers = `CREATE TABLE IF NOT EXISTS fleetmesh_frontends (
	name text PRIMARY KEY,
	did text NOT NULL,
	relay_url text NOT NULL,
	host text NOT NULL,
	pid integer NOT NULL,
	version text NOT NULL,
	started timestamptz NOT NULL,
	heartbeat timestamptz NOT NULL,
	role_backend integer NOT NULL DEFAULT 0
)`

// Member is one front-end as the members table and the database's
// sessions show it.
type Member struct {
	// Name is the front-end's name: its host and relay listen address.
	Name     string    `json:"name"`
	RelayURL string    `json:"relay_url"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	// Heartbeat is when the front-end last renewed its row.
	Heartbeat time.Time `json:"heartbeat"`
	// Stale is set when the heartbeat is older than three heartbeats.
	Stale bool `json:"stale,omitempty"`
	// MeshRole is set on the front-end whose session holds the node's
	// mesh role lock, as the database's lock table says.
	MeshRole bool `json:"mesh_role,omitempty"`
}

// Members is this front-end's registration in the members table: it
// renews the row every Heartbeat until Close, which removes it.
type Members struct {
	pool *pgxpool.Pool
	me   Member
	did  string
	key  int64
	log  *slog.Logger
	// role is the backend pid of the session holding the mesh role for
	// this front-end, 0 when it does not; each heartbeat writes it.
	role atomic.Int32

	cancel context.CancelFunc
	done   chan struct{}
}

// Name is a front-end's name from its relay listen address: the host
// name and the address, unique among the front-ends of one node.
func Name(listen string) string {
	host, _ := os.Hostname()
	return host + "/" + listen
}

// Join registers the front-end me of the node did (its mesh role lock
// key is key) in the database at url and starts its heartbeat. It keeps
// a pool of its own of at most two connections.
func Join(ctx context.Context, url string, did string, key int64, me Member, log *slog.Logger) (_ *Members, err error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("frontend: store.postgres_url: %w", err)
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.RuntimeParams["application_name"] = "fleetmesh-members " + me.Name
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("frontend: %w", err)
	}
	defer func() {
		if err != nil {
			pool.Close()
		}
	}()
	if err := createTable(ctx, pool); err != nil {
		return nil, err
	}
	if me.Host == "" {
		me.Host, _ = os.Hostname()
	}
	if me.PID == 0 {
		me.PID = os.Getpid()
	}
	me.Started = time.Now().UTC()
	// Rows of front-ends gone for long are forgotten as one joins.
	if _, err := pool.Exec(ctx, `DELETE FROM fleetmesh_frontends WHERE did = $1 AND heartbeat < now() - $2::interval`, did, (20 * Heartbeat).String()); err != nil {
		return nil, fmt.Errorf("frontend: members: %w", err)
	}
	m := &Members{pool: pool, me: me, did: did, key: key, log: log, done: make(chan struct{})}
	if err := m.beat(ctx); err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(hctx)
	return m, nil
}

// createTable makes the members and standing tables once, under a
// transaction-scoped advisory lock.
func createTable(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, createMembers); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, createStanding)
		return err
	})
	if err != nil {
		return fmt.Errorf("frontend: create the members and standing tables: %w", err)
	}
	return nil
}

func (m *Members) beat(ctx context.Context) error {
	_, err := m.pool.Exec(ctx, `INSERT INTO fleetmesh_frontends (name, did, relay_url, host, pid, version, started, heartbeat, role_backend)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now(), $8)
		ON CONFLICT (name) DO UPDATE SET did = $2, relay_url = $3, host = $4, pid = $5, version = $6, started = $7, heartbeat = now(), role_backend = $8`,
		m.me.Name, m.did, m.me.RelayURL, m.me.Host, m.me.PID, m.me.Version, m.me.Started, m.role.Load())
	if err != nil {
		return fmt.Errorf("frontend: heartbeat: %w", err)
	}
	return nil
}

func (m *Members) run(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.beat(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("frontend: heartbeat", "err", err)
		}
	}
}

// HoldsRole records that this front-end holds the mesh role through r
// (nil: it does not), at once and with each heartbeat.
func (m *Members) HoldsRole(ctx context.Context, r *Role) error {
	var pid int32
	if r != nil {
		pid = int32(r.BackendPID())
	}
	m.role.Store(pid)
	return m.beat(ctx)
}

// Close stops the heartbeat and removes this front-end's row.
func (m *Members) Close() error {
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := m.pool.Exec(ctx, `DELETE FROM fleetmesh_frontends WHERE name = $1 AND pid = $2`, m.me.Name, m.me.PID)
	m.pool.Close()
	return err
}

// List returns the node's front-ends, the one holding the mesh role
// marked from the database's own lock table (not from what a front-end
// said of itself).
func (m *Members) List(ctx context.Context) ([]Member, error) {
	return List(ctx, m.pool, m.did, m.key)
}

// List returns the front-ends of the node did whose mesh role lock key is
// key, by name.
func List(ctx context.Context, pool *pgxpool.Pool, did string, key int64) ([]Member, error) {
	holder, err := roleHolder(ctx, pool, key)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT name, relay_url, host, pid, version, started, heartbeat,
		heartbeat < now() - $2::interval, role_backend FROM fleetmesh_frontends WHERE did = $1 ORDER BY name`, did, (3 * Heartbeat).String())
	if err != nil {
		return nil, fmt.Errorf("frontend: members: %w", err)
	}
	var out []Member
	for rows.Next() {
		var mb Member
		var role int32
		if err := rows.Scan(&mb.Name, &mb.RelayURL, &mb.Host, &mb.PID, &mb.Version, &mb.Started, &mb.Heartbeat, &mb.Stale, &role); err != nil {
			rows.Close()
			return nil, fmt.Errorf("frontend: members: %w", err)
		}
		mb.MeshRole = holder != 0 && role == holder
		out = append(out, mb)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("frontend: members: %w", err)
	}
	return out, nil
}

// roleHolder is the backend pid of the session that holds the lock key,
// 0 when none does. A bigint advisory lock shows in pg_locks as its high
// and low 32 bits with objsubid 1.
func roleHolder(ctx context.Context, pool *pgxpool.Pool, key int64) (int32, error) {
	var pid int32
	err := pool.QueryRow(ctx, `SELECT l.pid FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		AND l.classid = (($1::bigint >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid`, key).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("frontend: who holds the mesh role: %w", err)
	}
	return pid, nil
}
