package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/frontend"
	"fleetmesh.org/fleetmesh/manage"
	"fleetmesh.org/fleetmesh/pgstore"
	"fleetmesh.org/fleetmesh/store"
)

func init() {
	register("store", "operate on a node's event store (migrate)", runStore)
}

// storeVerbs describes the verbs of `fleetmesh store`.
var storeVerbs = map[string]string{
	"migrate": "copy a stopped node's Pebble store and its operator's lists (manage.db) into PostgreSQL, for [store] backend = 'postgres'",
}

func runStore(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: fleetmesh store migrate --home DIR --to postgres://...")
		fmt.Fprintf(stderr, "  %-10s %s\n", "migrate", storeVerbs["migrate"])
		if len(args) == 0 {
			return fmt.Errorf("%w: say migrate", errUsage)
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	if sub != "migrate" {
		return fmt.Errorf("%w: fleetmesh store %s: the verb is migrate", errUsage, sub)
	}
	fs := flag.NewFlagSet("store migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	h := homeFlag(fs)
	to := fs.String("to", "", "the PostgreSQL database to copy into (`URL` postgres://user:pass@host:5432/db), as [store] postgres_url will name it")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *h == "" {
		return fmt.Errorf("%w: --home DIR is required", errUsage)
	}
	cfg, err := config.Load(home(*h).ConfigPath())
	if err != nil {
		return err
	}
	check := cfg
	check.Store.Backend, check.Store.PostgresURL = config.StorePostgres, *to
	if err := check.Validate(); err != nil {
		return fmt.Errorf("%w: --to: %v", errUsage, err)
	}
	dir := home(*h).Path(cfg.Store.Dir)
	// The Pebble store's lock refuses a running node's store: migrate a
	// stopped one, then start the front-ends on PostgreSQL.
	src, err := store.Open(dir, store.Options{MaxScan: math.MaxInt})
	if err != nil {
		return fmt.Errorf("open the Pebble store %s (stop the node first): %w", dir, err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, *to, pgstore.Options{})
	if err != nil {
		return err
	}
	defer dst.Close()
	start := time.Now()
	got, err := frontend.CopyFromPebble(ctx, src, dst, func(c frontend.Copied) {
		fmt.Fprintf(stderr, "fleetmesh: %d events read\n", c.Read)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "copied %d events from %s in %s: %v\n", got.Read, dir, time.Since(start).Round(time.Millisecond), got.Results)
	if err := migrateLists(ctx, home(*h).Path(manage.FileName), dst, stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "now set [store] backend = 'postgres' and postgres_url in config.toml")
	return nil
}

// migrateLists copies the operator's NIP-86 lists from the node's
// manage.db, if it has one, into the database, where every front-end
// reads them.
func migrateLists(ctx context.Context, path string, dst *pgstore.Store, stdout io.Writer) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	src, err := manage.OpenFile(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("%w (stop the node first)", err)
	}
	defer src.Close()
	n, err := manage.CopyLists(ctx, dst.ManageLists(), src)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "copied %d entries of the operator's lists from %s\n", n, path)
	return nil
}
