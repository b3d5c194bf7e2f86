package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/node"
)

func init() {
	register("init", "make a node home: a new key (mode 0600) and a config file", runInit)
	register("id", "print the node's DID, PeerID, iroh EndpointId and class as JSON", runID)
}

func runInit(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := homeFlag(fs)
	class := fs.String("class", "", "node class: anchor, home, leaf, or auto (the default: anchor while publicly reachable, else home)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch *class {
	case "", config.ClassAnchor, config.ClassHome, config.ClassLeaf, config.ClassAuto:
	default:
		return fmt.Errorf("%w: --class %q: must be anchor, home, leaf or auto", errUsage, *class)
	}
	key, created, err := node.Init(home(*dir), *class)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stdout, "created node home %s\n", *dir)
		fmt.Fprintf(stdout, "did %s\n", key.DID())
		return nil
	}
	fmt.Fprintf(stdout, "node home %s already exists; key kept\n", *dir)
	fmt.Fprintf(stdout, "did %s\n", key.DID())
	if *class == "" {
		return nil
	}
	// init never rewrites an existing config.toml (an operator may have
	// edited it), so a --class that differs from it is not applied: say so
	// rather than let a script believe it made, say, an anchor.
	h := home(*dir)
	cfg, err := config.Load(h.ConfigPath())
	if err != nil {
		return err
	}
	if cfg.Class == *class {
		fmt.Fprintf(stdout, "class %s, as config.toml already says\n", cfg.Class)
		return nil
	}
	return fmt.Errorf("%w: --class %s not applied: %s says class = '%s', and init does not rewrite an existing config; set class = '%s' there to change it",
		errUsage, *class, h.ConfigPath(), cfg.Class, *class)
}

// IDInfo is what `fleetmesh id` prints.
type IDInfo struct {
	DID          string `json:"did"`
	PeerID       string `json:"peer_id"`
	EndpointID   string `json:"endpoint_id"`
	Class        string `json:"class"`
	KeyAgreement string `json:"key_agreement"`
}

func runID(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("id", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := homeFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	h := home(*dir)
	key, err := loadKey(*dir)
	if err != nil {
		return err
	}
	cfg, err := config.Load(h.ConfigPath())
	if err != nil {
		return err
	}
	ka, err := identity.KeyAgreementID(key.DID())
	if err != nil {
		return err
	}
	return printJSON(stdout, IDInfo{
		DID:          key.DID(),
		PeerID:       key.PeerID().String(),
		EndpointID:   key.EndpointID(),
		Class:        cfg.Class,
		KeyAgreement: ka,
	})
}
