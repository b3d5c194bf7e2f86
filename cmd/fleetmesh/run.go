package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/frontend"
	"fleetmesh.org/fleetmesh/node"
)

func init() {
	register("run", "run a node: a Nostr relay on the embedded store", runRun)
}

// nodeFlags are the flags `run` and `gateway` share (docs/design.md §11).
type nodeFlags struct {
	home       *string
	listen     *string
	meshListen stringList
	bootstrap  stringList
	join       stringList
	pprof      *bool
	debugMesh  *bool
}

func addNodeFlags(fs *flag.FlagSet) *nodeFlags {
	nf := &nodeFlags{
		home:   homeFlag(fs),
		listen: fs.String("listen", "", "relay `HOST:PORT` (overrides relay.listen; port 0 picks a free one)"),
		pprof:  fs.Bool("pprof", false, "serve /debug/pprof/ on the relay port"),
		debugMesh: fs.Bool("debug-mesh", false,
			"serve /debug/mesh on the relay port: reachability, relaying and libp2p connections (with peer addresses)"),
	}
	fs.Var(&nf.meshListen, "mesh-listen", "mesh listen `MULTIADDR` (repeatable)")
	fs.Var(&nf.bootstrap, "bootstrap", "bootstrap peer `MULTIADDR` (repeatable; none is built in)")
	fs.Var(&nf.join, "join", "join the mesh through a join `CODE` from fleetmesh invite (fmjoin1…) or a Nostr relay "+
		"where nodes announce themselves (wss://…, ws:// on loopback); repeatable, for this run only")
	return nf
}

// openNode makes the home if needed, loads its config, applies the flags
// (finding the peers --join names) and opens the node. ready runs once the
// relay serves.
func (nf *nodeFlags) openNode(ctx context.Context, stdout, stderr io.Writer, role *frontend.Role) (*node.Node, node.Options, error) {
	h := home(*nf.home)
	key, created, err := node.Init(h, "")
	if err != nil {
		return nil, node.Options{}, err
	}
	if created {
		fmt.Fprintf(stderr, "fleetmesh: created a new node home in %s\n", *nf.home)
	}
	cfg, err := config.Load(h.ConfigPath())
	if err != nil {
		return nil, node.Options{}, err
	}
	if *nf.listen != "" {
		cfg.Relay.Listen = *nf.listen
	}
	if len(nf.meshListen) > 0 {
		cfg.Mesh.Listen = nf.meshListen
	}
	if len(nf.bootstrap) > 0 {
		cfg.Mesh.Bootstrap = nf.bootstrap
	}
	setGCPercent(cfg.Runtime)
	log := newLogger(cfg.Log, stderr)
	joined, err := joinPeers(ctx, nf.join, key.DID(), knownPeers(h.Path(node.MeshDir)), log)
	if err != nil {
		return nil, node.Options{}, err
	}
	cfg.Mesh.Bootstrap = append(cfg.Mesh.Bootstrap, joined...)
	cfg.Relay.Software = currentVersion().Version
	var n *node.Node
	opts := node.Options{
		Version:   currentVersion().short(),
		Home:      h,
		Config:    cfg,
		Key:       key,
		Log:       log,
		Pprof:     *nf.pprof,
		MeshRole:  role,
		DebugMesh: *nf.debugMesh,
		Ready: func(url string) {
			fmt.Fprintf(stdout, "did %s\n", key.DID())
			fmt.Fprintf(stdout, "peer_id %s\n", key.PeerID())
			fmt.Fprintf(stdout, "relay %s\n", url)
			for _, a := range n.MeshAddrs() {
				fmt.Fprintf(stdout, "mesh %s\n", a)
			}
			if info, ok := n.Iroh(); ok {
				fmt.Fprintf(stdout, "iroh %s %s\n", info.ID, strings.Join(info.Addrs, " "))
			}
			fmt.Fprintln(stdout, networkLine(cfg, n.MDNS()))
		},
	}
	n, err = node.Open(opts)
	return n, opts, err
}

func runRun(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nf := addNodeFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	var role *frontend.Role
	for {
		n, _, err := nf.openNode(ctx, stdout, stderr, role)
		if err != nil {
			return err
		}
		err = n.Serve(ctx)
		if !errors.Is(err, node.ErrRoleChanged) || ctx.Err() != nil {
			if r := n.TakenRole(); r != nil {
				r.Release()
			}
			return err
		}
		// A front-end over PostgreSQL took the mesh role or lost it:
		// it opens again, with its mesh side or without.
		role = n.TakenRole()
	}
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

// setGCPercent applies runtime.gc_percent unless the operator set GOGC,
// which the Go runtime has already applied and which wins.
func setGCPercent(rc config.RuntimeConfig) {
	if _, set := os.LookupEnv("GOGC"); set || rc.GCPercent <= 0 {
		return
	}
	debug.SetGCPercent(rc.GCPercent)
}
