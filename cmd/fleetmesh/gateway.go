package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/gateway"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/node"
)

func init() {
	register("gateway", "run a gateway: a node that carries events to and from a private relay backend", runGateway)
}

func runGateway(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nf := addNodeFlags(fs)
	backend := fs.String("backend", "", "backend relay `URL` (wss://…, or ws:// on loopback; overrides backend in gateway.toml)")
	carryAll := fs.Bool("carry-everything", false, "carry every event both ways (what the boundary policy allows); in place of to_mesh and to_backend in gateway.toml")
	if err := parse(fs, args); err != nil {
		return err
	}
	dir, err := filepath.Abs(*nf.home)
	if err != nil {
		return err
	}
	*nf.home = dir
	h := home(dir)

	// Everything the shared-nothing checks need is read before the node
	// opens, so a refused gateway never touches the store or a port.
	if _, created, err := node.Init(h, ""); err != nil {
		return err
	} else if created {
		fmt.Fprintf(stderr, "fleetmesh: created a new node home in %s\n", dir)
	}
	meshKey, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		return err
	}
	ncfg, err := config.Load(h.ConfigPath())
	if err != nil {
		return err
	}
	settings, backendKey, err := gateway.Prepare(gateway.MeshSide{
		Home:       dir,
		KeyFile:    h.KeyPath(),
		Seed:       meshKey.PrivateKey().Seed(),
		ConfigFile: h.ConfigPath(),
		StoreDir:   h.Path(ncfg.Store.Dir),
	}, gateway.Overrides{Backend: *backend, CarryEverything: *carryAll})
	if se := (*gateway.SettingsError)(nil); errors.As(err, &se) {
		return fmt.Errorf("%w: %v", errUsage, err)
	} else if err != nil {
		return err
	}

	n, opts, err := nf.openNode(ctx, stdout, stderr, nil)
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Options{
		Settings: settings,
		Home:     dir,
		Key:      backendKey,
		Relay:    n.Relay(),
		Store:    n.Store(),
		Policy:   n.Boundary(),
		Registry: n.Registry(),
		Log:      opts.Log,
	})
	if err != nil {
		return err
	}
	n.AddHealth("gateway", gw.Health)
	n.SetGatewayStatus(func() node.StatusGateway {
		st := node.StatusGateway{Backend: settings.Backend, CatchUp: map[string]node.StatusSync{}}
		for dir, p := range gw.Progress() {
			st.CatchUp[dir] = node.StatusSyncOf(p)
		}
		return st
	})
	fmt.Fprintf(stdout, "backend %s\n", settings.Backend)
	fmt.Fprintf(stdout, "backend_pubkey %x\n", backendKey.PubKey())
	for _, line := range settings.Describe() {
		fmt.Fprintf(stdout, "carries %s\n", line)
	}

	// The node outlives the gateway: the gateway stops first, so nothing it
	// stores meets a closed store, then the node shuts down in order.
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNode()
	gwCtx, stopGateway := context.WithCancel(ctx)
	defer stopGateway()
	var wg sync.WaitGroup
	served := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		served <- n.Serve(nodeCtx)
		stopGateway() // a node that stops on its own takes the gateway with it
	}()
	gwErr := gw.Run(gwCtx)
	stopNode()
	wg.Wait()
	return errors.Join(gwErr, <-served)
}
