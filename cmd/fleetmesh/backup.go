package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"fleetmesh.org/fleetmesh/node"
)

func init() {
	register("backup", "copy a node home (store checkpoint, keys, config, databases) to a new directory, running or not", runBackup)
}

func runBackup(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetmesh backup --home DIR --out DIR")
		fmt.Fprintln(stderr, "\nCopies the node home to --out, a directory that must not exist: the event")
		fmt.Fprintln(stderr, "store as a Pebble checkpoint, the accounting and mediation databases, the")
		fmt.Fprintln(stderr, "keys and the config. A node running on the home takes it itself (over its")
		fmt.Fprintln(stderr, "loopback HTTP port, with the token in node.run) and keeps serving; with no")
		fmt.Fprintln(stderr, "node running, backup locks the home and reads it, migrating nothing.")
		fmt.Fprintln(stderr, "To restore, stop the node and run it on the backup (or copy it in place).")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	dir := homeFlag(fs)
	out := fs.String("out", "", "the backup's `directory` (must not exist)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return fmt.Errorf("%w: fleetmesh backup needs --home DIR and --out DIR", errUsage)
	}
	target, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	m, err := node.Backup(ctx, home(*dir), target)
	if err != nil {
		return err
	}
	how := "from the stopped home"
	if m.Live {
		how = "through the running node"
	}
	fmt.Fprintf(stdout, "backup %s\n", target)
	fmt.Fprintf(stdout, "did %s\n", m.DID)
	fmt.Fprintf(stdout, "took %d files, %d bytes, %s; the store is in %s\n", m.Files, m.Bytes, how, filepath.Join(target, filepath.FromSlash(m.StoreDir)))
	return nil
}
