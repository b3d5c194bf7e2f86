package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/frontend"
	"fleetmesh.org/fleetmesh/pgstore"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// EventStore is what a node uses of its event store: the relay's calls,
// the mesh sync's Delete, and the space it takes. The embedded Pebble
// store (package store) and PostgreSQL (package pgstore) implement it,
// as [store] backend chooses.
type EventStore interface {
	relay.Store
	// Delete removes stored events by id (meshsync.Local).
	Delete(ctx context.Context, ids [][32]byte) (int, error)
	// DiskBytes is the space the store takes; MaxBytes its bound (0: none).
	DiskBytes() uint64
	MaxBytes() uint64
	Close() error
}

// openStore opens the store [store] backend names: the Pebble store in
// the home, or the PostgreSQL database this node's front-ends share (pg
// is then that store, else nil).
func openStore(opts Options, files relay.FileBudget, log *slog.Logger) (st EventStore, pg *pgstore.Store, err error) {
	cfg := opts.Config
	if cfg.Store.Backend == config.StorePostgres {
		ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
		defer cancel()
		pg, err := pgstore.Open(ctx, withApplicationName(cfg.Store.PostgresURL, "fleetmesh "+frontend.Name(cfg.Relay.Listen)), pgstore.Options{MaxBytes: cfg.Mesh.StorageMaxBytes, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("node: [store] postgres_url: %w", err)
		}
		return pg, pg, nil
	}
	ps, err := store.Open(opts.Home.Path(cfg.Store.Dir), store.Options{
		CacheBytes:    int64(cfg.Store.CacheMB) << 20,
		MemTableBytes: uint64(cfg.Store.MemTableMB) << 20,
		MaxBytes:      cfg.Mesh.StorageMaxBytes,
		MaxOpenFiles:  files.Store,
		Logger:        log,
	})
	if err != nil {
		return nil, nil, err
	}
	return ps, nil, nil
}

// withApplicationName sets the sessions' application_name in a
// postgres:// URL that sets none, so that pg_stat_activity tells the
// front-ends apart.
func withApplicationName(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	if q.Get("application_name") != "" {
		return raw
	}
	q.Set("application_name", name)
	// A space as %20: pgx reads a '+' in the query as itself.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}
