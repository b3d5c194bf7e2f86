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
	failed := 0
	_, err := conformance.Run(ctx, &conformance.Target{URL: url, Timeout: *timeout}, func(r conformance.Result) {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(stdout, "SKIP %s: %s\n", r.Name, r.Skipped)
		case r.Err != nil:
			failed++
			fmt.Fprintf(stdout, "FAIL %s: %v\n", r.Name, r.Err)
		default:
			fmt.Fprintf(stdout, "ok   %s\n", r.Name)
		}
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed against %s", failed, url)
	}
	return nil
}
