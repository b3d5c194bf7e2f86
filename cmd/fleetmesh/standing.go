package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"fleetmesh.org/fleetmesh/standing"
)

func init() {
	register("standing", "show the standing this node gives other nodes, with its reasons", runStanding)
}

func runStanding(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("standing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	h := homeFlag(fs)
	of := fs.String("of", "", "`DID` of one node to show (default: every node with receipts here)")
	asJSON := fs.Bool("json", false, "print a JSON array of objects (did, standing, verified_windows, …)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *of != "" && !strings.HasPrefix(*of, "did:key:") {
		return fmt.Errorf("%w: --of %q: give a did:key DID", errUsage, *of)
	}
	c, err := newControl(*h)
	if err != nil {
		return err
	}
	q := url.Values{}
	if *of != "" {
		q.Set("of", *of)
	}
	var es []standing.Entry
	if err := c.do(ctx, "GET", "/standing?"+q.Encode(), nil, &es); err != nil {
		return err
	}
	if *of != "" && len(es) == 0 {
		// A node with no receipts here has standing 0, for no reason.
		es = []standing.Entry{{DID: *of}}
	}
	if *asJSON {
		return printJSON(stdout, es)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DID\tSTANDING\tWINDOWS\tCOUNTERPARTIES\tTRUSTED\tDISPUTES\tFORK PROOFS\tBOTTLENECK\tLAST WINDOW\tANCHOR")
	for _, e := range es {
		last := "-"
		if e.LastWindow > 0 {
			last = time.Unix(e.LastWindow, 0).UTC().Format(time.RFC3339)
		}
		wall := ""
		if e.Wall {
			wall = " (wall)"
		}
		fmt.Fprintf(tw, "%s\t%.6f%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%s\t%v\n", e.DID, e.Standing, wall, e.VerifiedWindows,
			e.Counterparties, e.TrustedCounterparties, e.Disputes, e.ForkProofs, e.Bottleneck, last, e.Anchor)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(es) > 0 && !es[0].Computed.IsZero() {
		fmt.Fprintf(stdout, "computed %s\n", es[0].Computed.UTC().Format(time.RFC3339))
	}
	return nil
}
