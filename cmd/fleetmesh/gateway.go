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
	if err := parse(fs, args); err != nil {
		return err
	}
	dir, err := filepath.Abs(*nf.home)
	if err != nil {
		return err
	}
	*nf.home = dir
	h := home(dir)

	// Everything the shared-nothing check needs is read before the node
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
	// One file read as both configs would be refused below, but parsing it
	// first would fail with a less useful message.
	if err := gateway.CheckConfigFiles(filepath.Join(dir, gateway.ConfigFile), h.ConfigPath()); err != nil {
		return err
	}
	gcfg, err := gateway.LoadConfig(dir)
	if err != nil {
		return err
	}
	if *backend != "" {
		gcfg.Backend = *backend
	}
	settings, err := gcfg.Settings(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	meshSeed := meshKey.PrivateKey().Seed()
	sides := gateway.Sides{
		Home:           dir,
		MeshKeyFile:    h.KeyPath(),
		MeshSeed:       meshSeed,
		NodeConfigFile: h.ConfigPath(),
		StoreDir:       h.Path(ncfg.Store.Dir),
		GatewayConfig:  filepath.Join(dir, gateway.ConfigFile),
		BackendKeyFile: settings.BackendKeyFile,
		BackendDataDir: settings.BackendDataDir,
	}
	if err := gateway.CheckPaths(sides); err != nil {
		return err
	}
	backendKey, secret, err := gateway.LoadOrCreateBackendKey(settings.BackendKeyFile)
	if err != nil {
		return err
	}
	if err := gateway.CheckSecrets(meshSeed, secret); err != nil {
		return err
	}

	n, opts, err := nf.openNode(stdout, stderr)
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
	fmt.Fprintf(stdout, "backend %s\n", settings.Backend)
	fmt.Fprintf(stdout, "backend_pubkey %x\n", backendKey.PubKey())

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
