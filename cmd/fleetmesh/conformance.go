package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/conformance"
)

func init() {
	register("conformance", "run the conformance suite against a node by address", runConformance)
}

func runConformance(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "", "the node's relay `URL` (ws://HOST:PORT) or HOST:PORT")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for each answer")
	expiry := fs.Duration("expiry", time.Hour, "how long the suite's test events live (NIP-40 expiration)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: fleetmesh conformance --target ws://HOST:PORT [flags]

Runs the conformance suite against a node, as an outside client would. It
publishes about thirty small test events signed by a throwaway key, each
tagged with the run's id and expiring (NIP-40) after --expiry; its last
check deletes them all (NIP-09) and checks none is served any more. Exits 0
when every check passes, 1 when any fails.

`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if *target == "" {
		return fmt.Errorf("%w: --target is required, e.g. --target ws://127.0.0.1:7447", errUsage)
	}
	url := *target
	if !strings.Contains(url, "://") {
		url = "ws://" + url
	}
	failed, skipped, passed := 0, 0, 0
	_, err := conformance.Run(ctx, &conformance.Target{URL: url, Timeout: *timeout, Expiry: *expiry}, func(r conformance.Result) {
		switch {
		case r.Skipped != "":
			skipped++
			fmt.Fprintf(stdout, "SKIP %s: %s\n", r.Name, r.Skipped)
		case r.Err != nil:
			failed++
			fmt.Fprintf(stdout, "FAIL %s: %v\n", r.Name, r.Err)
		default:
			passed++
			fmt.Fprintf(stdout, "ok   %s\n", r.Name)
		}
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed against %s", failed, url)
	}
	fmt.Fprintf(stdout, "conformance: all %d checks pass against %s (%d skipped)\n", passed, url, skipped)
	return nil
}
