package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the session advisory lock key under which Open brings
// the schema up to date, so that of many front-ends starting at once one
// migrates and the others wait and then find nothing to do.
const migrationLock int64 = 0x666c6565746d6573 // "fleetmes"

// migration is one numbered file of migrations/.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded files NNNN_name.sql in version order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("pgstore: migration file %s is not named NNNN_name.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstore: migration %s: want version %d", m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the schema version this build writes: the number of
// its newest migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// ErrSchemaNewer is wrapped by Open when the database was migrated by a
// newer fleetmesh than this one.
var ErrSchemaNewer = errors.New("pgstore: the database's schema is newer than this fleetmesh")

// migrate brings the schema up to date: under a session advisory lock, it
// creates the schema and its version table if missing, then applies each
// migration not yet recorded, each in its own transaction with its record.
// It returns how many it applied.
func migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	return applyMigrations(ctx, pool, ms)
}

// applyMigrations is migrate with the migrations given: all of them, or
// in a test the first few, to make a database as an older build left it.
func applyMigrations(ctx context.Context, pool *pgxpool.Pool, ms []migration) (int, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return 0, fmt.Errorf("pgstore: migration lock: %w", err)
	}
	defer func() {
		// A failed unlock leaves the session holding the lock; closing
		// the connection releases it.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS fleetmesh;
		CREATE TABLE IF NOT EXISTS fleetmesh.schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
		return 0, fmt.Errorf("pgstore: create schema fleetmesh: %w", err)
	}
	var have int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM fleetmesh.schema_migrations").Scan(&have); err != nil {
		return 0, fmt.Errorf("pgstore: read schema version: %w", err)
	}
	if have > len(ms) {
		return 0, fmt.Errorf("%w: version %d, this build knows up to %d; run the newer fleetmesh", ErrSchemaNewer, have, len(ms))
	}
	applied := 0
	for _, m := range ms[have:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO fleetmesh.schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("pgstore: migration %s: %w", m.name, err)
		}
		applied++
	}
	return applied, nil
}
