package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"fleetmesh.org/fleetmesh/leaf"
)

func init() {
	register("leaf", "run a leaf (a phone's profile) on this machine: wake, sync within a budget, sleep", runLeaf)
}

// runLeaf runs the leaf profile on a desktop with the same code a phone
// app embeds (spec/leaf.md): one wake per interval, each printed as one
// JSON line; nothing on the wire between wakes.
func runLeaf(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("leaf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := homeFlag(fs)
	var pairs, subs stringList
	fs.Var(&pairs, "pair", "a home node's join `CODE` as fleetmesh invite prints it (or a didcomm invite URL); repeatable")
	fs.Var(&subs, "subscribe", "a NIP-01 filter (JSON) whose events the leaf keeps; repeatable")
	once := fs.Bool("once", false, "do one wake, print its summary and exit")
	interval := fs.Duration("wake-interval", 15*time.Minute, "time between wakes")
	budget := fs.Duration("budget", leaf.DefaultBudgetMs*time.Millisecond, "the most one wake may take")
	maxStore := fs.Int64("max-store-bytes", leaf.DefaultMaxStoreBytes, "bound of the local event store")
	eviction := fs.String("eviction", leaf.EvictOldest, "which events go when the store is full: oldest or first-stored")
	push := fs.String("push", "", "a UnifiedPush-style endpoint URL the home nodes POST a wake to (\"\" keeps the one set before)")
	window := fs.Duration("window", leaf.DefaultWindowSecs*time.Second, "the accounting window of the receipts signed with the home nodes: their [accounting] window")
	serve := fs.Bool("serve", false, "serve cached events the home nodes lack during each wake (a phone allows it on a charger and an unmetered network)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *budget <= 0 || *interval <= 0 {
		return fmt.Errorf("%w: --budget and --wake-interval must be positive", errUsage)
	}
	if *window < time.Second || *window%time.Second != 0 {
		return fmt.Errorf("%w: --window %s: whole seconds, at least 1s", errUsage, *window)
	}
	cfg := leaf.NewConfig(home(*dir).Path("leaf"))
	cfg.BudgetMs, cfg.MaxStoreBytes, cfg.Eviction = budget.Milliseconds(), *maxStore, *eviction
	cfg.WindowSecs = int64(*window / time.Second)
	l, err := leaf.New(cfg, leaf.NewFileKeyStore(home(*dir).KeyPath()))
	if err != nil {
		return err
	}
	defer l.Close()
	l.SetServe(*serve)
	for _, p := range pairs {
		if err := l.Pair(p); err != nil {
			return fmt.Errorf("%w: --pair: %v", errUsage, err)
		}
	}
	for _, s := range subs {
		if err := l.Subscribe(s); err != nil {
			return fmt.Errorf("%w: --subscribe %s: %v", errUsage, s, err)
		}
	}
	if *push != "" {
		if err := l.SetPushEndpoint(*push); err != nil {
			return fmt.Errorf("%w: --push: %v", errUsage, err)
		}
	}
	for {
		wctx := leaf.NewContext()
		stop := context.AfterFunc(ctx, wctx.Cancel)
		sum, err := l.Sync(wctx)
		stop()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, sum.JSON())
		if *once || ctx.Err() != nil {
			return nil
		}
		l.Suspend()
		t := time.NewTimer(*interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
