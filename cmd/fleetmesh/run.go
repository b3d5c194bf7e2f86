package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/node"
)

func init() {
	register("run", "run a node: a Nostr relay on the embedded store", runRun)
}

func runRun(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := homeFlag(fs)
	listen := fs.String("listen", "", "relay `HOST:PORT` (overrides relay.listen; port 0 picks a free one)")
	var meshListen, bootstrap stringList
	fs.Var(&meshListen, "mesh-listen", "mesh listen `MULTIADDR` (repeatable)")
	fs.Var(&bootstrap, "bootstrap", "bootstrap peer `MULTIADDR` (repeatable; none is built in)")
	pprof := fs.Bool("pprof", false, "serve /debug/pprof/ on the relay port")
	if err := parse(fs, args); err != nil {
		return err
	}
	h := home(*dir)
	key, created, err := node.Init(h, "")
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stderr, "fleetmesh: created a new node home in %s\n", *dir)
	}
	cfg, err := config.Load(h.ConfigPath())
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Relay.Listen = *listen
	}
	if len(meshListen) > 0 || len(bootstrap) > 0 {
		return fmt.Errorf("%w: --mesh-listen and --bootstrap need the mesh, which this build does not include yet", errUsage)
	}
	log := newLogger(cfg.Log, stderr)
	n, err := node.Open(node.Options{
		Home:   h,
		Config: cfg,
		Key:    key,
		Log:    log,
		Pprof:  *pprof,
		Ready: func(url string) {
			fmt.Fprintf(stdout, "did %s\n", key.DID())
			fmt.Fprintf(stdout, "peer_id %s\n", key.PeerID())
			fmt.Fprintf(stdout, "relay %s\n", url)
		},
	})
	if err != nil {
		return err
	}
	return n.Serve(ctx)
}

func newLogger(c config.LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	switch strings.ToLower(c.Level) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
