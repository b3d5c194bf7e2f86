// Command khatru-relay runs the reference relay of the fleetmesh relay
// benchmark: khatru v0.17.4 (the last patch release of the v0.17 line; see
// docs/benchmarks/relay.md for why not v0.17.0) on an eventstore v0.16.2
// backend, wired the way khatru's docs and examples/basic-badger do it, with
// khatru's default policies only (NewRelay installs no rate limits; the
// optional policies.ApplySaneDefaults is deliberately not applied because its
// per-IP limits would throttle a loopback load generator).
//
// It exists only for benchmarking and lives in the bench-only module so that
// the fleetmesh product module never depends on khatru. It is not a relay to
// deploy.
//
// With --postgres URL it stores events in PostgreSQL through eventstore's own
// postgresql backend (the same v0.16.2 module khatru v0.17.4 requires: one
// "event" table, a GIN index over tag values, lib/pq through sqlx), at that
// backend's defaults, so that fleetmesh's PostgreSQL front-ends can be
// measured against khatru on the same database server. The backend creates
// its schema on start; give each run a database of its own. That backend
// allows 80 open connections but leaves database/sql's idle pool at its
// default of 2, so with more than two concurrent queries connections are
// opened and closed all the time; --postgres-idle N keeps N idle instead, a
// tuning a khatru operator can add in a line, measured beside the default.
//
// On start it prints one line "relay ws://HOST:PORT" on stdout, the same line
// fleetmesh prints, so the harness can treat both relays alike. SIGTERM and
// SIGINT close the listener and the store.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fiatjaf/eventstore"
	"github.com/fiatjaf/eventstore/badger"
	"github.com/fiatjaf/eventstore/lmdb"
	"github.com/fiatjaf/eventstore/postgresql"
	"github.com/fiatjaf/khatru"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	data := flag.String("data", "", "data directory of the event store (required)")
	backend := flag.String("backend", "badger", "eventstore backend: badger (default, as in khatru's docs; no fsync before OK) or lmdb (fsyncs every commit)")
	postgres := flag.String("postgres", "", "PostgreSQL connection URL (postgres://USER@HOST:PORT/DB): store events there with eventstore's postgresql backend instead of --backend/--data")
	pgIdle := flag.Int("postgres-idle", 0, "with --postgres: idle connections kept in the pool (0 leaves eventstore's default, database/sql's 2)")
	withPprof := flag.Bool("pprof", false, "serve net/http/pprof under /debug/pprof/ on the relay port")
	flag.Parse()
	if *postgres != "" {
		if *data != "" || *backend != "badger" {
			fmt.Fprintln(os.Stderr, "khatru-relay: --postgres stores in PostgreSQL: leave out --data and --backend")
			os.Exit(2)
		}
		*backend, *data = "postgres", *postgres
	}
	if *pgIdle < 0 || (*pgIdle > 0 && *postgres == "") {
		fmt.Fprintln(os.Stderr, "khatru-relay: --postgres-idle takes a count >= 0 and needs --postgres URL")
		os.Exit(2)
	}
	if err := run(*listen, *data, *backend, *pgIdle, *withPprof); err != nil {
		fmt.Fprintln(os.Stderr, "khatru-relay:", err)
		os.Exit(1)
	}
}

// run serves until SIGTERM or SIGINT. data is the store's directory, or
// for the postgres backend its connection URL; pgIdle, if not 0, is the
// postgres backend's idle pool size.
func run(listen, data, backend string, pgIdle int, withPprof bool) error {
	if data == "" {
		return errors.New("--data DIR (or --postgres URL) is required")
	}
	if backend != "postgres" {
		if err := os.MkdirAll(data, 0o755); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}

	store, err := openStore(backend, data)
	if err != nil {
		return err
	}
	defer store.Close()
	if pg, ok := store.(*postgresql.PostgresBackend); ok && pgIdle > 0 {
		pg.DB.SetMaxIdleConns(pgIdle)
	}

	relay := khatru.NewRelay()
	relay.Info.Name = "khatru-relay (fleetmesh benchmark reference)"
	relay.Log = log.New(os.Stderr, "[khatru-relay] ", log.LstdFlags)
	relay.StoreEvent = append(relay.StoreEvent, store.SaveEvent)
	relay.QueryEvents = append(relay.QueryEvents, store.QueryEvents)
	relay.CountEvents = append(relay.CountEvents, store.CountEvents)
	relay.DeleteEvent = append(relay.DeleteEvent, store.DeleteEvent)
	relay.ReplaceEvent = append(relay.ReplaceEvent, store.ReplaceEvent)

	if withPprof {
		mux := relay.Router()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: relay, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("relay ws://%s\n", ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Shutdown does not wait for hijacked WebSocket connections; closing the
	// store afterwards is what khatru operators do on exit too.
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// countingStore is what the eventstore backends used here offer: storage plus NIP-45
// counting, which khatru wires as CountEvents.
type countingStore interface {
	eventstore.Store
	eventstore.Counter
}

// openStore opens the chosen eventstore backend with its defaults, as the
// khatru examples do. where is the directory, or for postgres the URL.
func openStore(backend, where string) (countingStore, error) {
	var s countingStore
	switch backend {
	case "lmdb":
		s = &lmdb.LMDBBackend{Path: where}
	case "badger":
		s = &badger.BadgerBackend{Path: where}
	case "postgres":
		// KeepRecentEvents only matters to AfterSave, which khatru never
		// calls; it is set so that nothing would prune if it did.
		s = &postgresql.PostgresBackend{DatabaseURL: where, KeepRecentEvents: true}
	default:
		return nil, fmt.Errorf("unknown --backend %q (want lmdb or badger, or --postgres URL)", backend)
	}
	if err := s.Init(); err != nil {
		if backend == "postgres" {
			return nil, fmt.Errorf("open postgres store (--postgres): %w", err)
		}
		return nil, fmt.Errorf("open %s store in %s: %w", backend, where, err)
	}
	return s, nil
}
