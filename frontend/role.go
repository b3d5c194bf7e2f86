package frontend

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RolePoll is how often a front-end without the mesh role asks for it,
// and how often the holder checks that its session, and so the lock,
// still stands. A front-end that dies is replaced within about this much
// plus the time the mesh takes to start.
const RolePoll = 2 * time.Second

// roleCheckTimeout bounds the holder's check of its session: generous,
// as a check cut short ends the session and with it the role.
const roleCheckTimeout = 30 * time.Second

// RoleLockKey is the advisory lock key of a node's mesh role: taken from
// the node's DID, so that nodes sharing a database server never share a
// lock.
func RoleLockKey(did string) int64 {
	sum := sha256.Sum256([]byte("fleetmesh mesh role\x00" + did))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// Role is the node's mesh role held by this front-end: a session advisory
// lock on a connection of its own, which no other query uses. It holds
// as long as the session does; Lost says when it no longer does.
type Role struct {
	conn   *pgx.Conn
	key    int64
	lost   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// TryRole takes the mesh role of the node whose lock key is key if no
// front-end holds it. It returns nil, nil when another does. name is set
// as the session's application_name, which status shows as the holder.
func TryRole(ctx context.Context, url string, key int64, name string) (*Role, error) {
	conn, err := connectRole(ctx, url, name)
	if err != nil {
		return nil, err
	}
	r, err := tryOn(ctx, conn, key)
	if r == nil {
		conn.Close(context.Background())
	}
	return r, err
}

// connectRole opens the session the role is held on.
func connectRole(ctx context.Context, url, name string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("frontend: store.postgres_url: %w", err)
	}
	cfg.RuntimeParams["application_name"] = RoleApplication(name)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("frontend: connect for the mesh role: %w", err)
	}
	return conn, nil
}

// tryOn asks for the lock on conn; a Role that owns conn if it got it.
func tryOn(ctx context.Context, conn *pgx.Conn, key int64) (*Role, error) {
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil {
		return nil, fmt.Errorf("frontend: take the mesh role: %w", err)
	}
	if !got {
		return nil, nil
	}
	wctx, cancel := context.WithCancel(context.Background())
	r := &Role{conn: conn, key: key, lost: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go r.watch(wctx)
	return r, nil
}

// WaitRole asks for the mesh role every RolePoll, on one session kept
// open between the asks, until this front-end gets it or ctx ends. A
// failed attempt (the database unreachable) is retried on a new session.
func WaitRole(ctx context.Context, url string, key int64, name string, onErr func(error)) (*Role, error) {
	t := time.NewTicker(RolePoll)
	defer t.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		var err error
		if conn == nil {
			conn, err = connectRole(ctx, url, name)
		}
		if err == nil {
			var r *Role
			r, err = tryOn(ctx, conn, key)
			if r != nil {
				conn = nil // the Role owns it now
				return r, nil
			}
			if err != nil {
				conn.Close(context.Background())
				conn = nil
			}
		}
		if err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// RoleApplication is the application_name of the session that holds a
// front-end's mesh role.
func RoleApplication(name string) string { return "fleetmesh-role " + name }

// watch checks the session every RolePoll and closes lost once it fails:
// the server has ended it (pg_terminate_backend, a restart) or the
// network has, and with it the lock.
func (r *Role) watch(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(RolePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A ping cut short closes the connection, and so ends the lock:
		// it is given long enough that only a dead session fails it.
		pctx, cancel := context.WithTimeout(ctx, roleCheckTimeout)
		err := r.conn.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			close(r.lost)
			return
		}
	}
}

// BackendPID is the server process of the session holding the role, as
// pg_locks shows it.
func (r *Role) BackendPID() uint32 { return r.conn.PgConn().PID() }

// Lost is closed when the session holding the role has ended: another
// front-end may hold it now, and this one must give up its mesh side.
func (r *Role) Lost() <-chan struct{} { return r.lost }

// Release gives the role up and closes its connection; the lock ends
// with the session.
func (r *Role) Release() error {
	r.cancel()
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	select {
	case <-r.lost:
	default:
		_, err = r.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", r.key)
	}
	return errors.Join(err, r.conn.Close(ctx))
}
