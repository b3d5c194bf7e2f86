package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/meter"
)

func init() {
	register("grants", "list, offer and revoke grants (list|offer|revoke)", runGrants)
}

func runGrants(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: fleetmesh grants list|offer|revoke --home DIR [flags]")
		for _, v := range []string{"list", "offer", "revoke"} {
			fmt.Fprintf(stderr, "  %-10s %s\n", v, grantsVerbs[v])
		}
		if len(args) == 0 {
			return fmt.Errorf("%w: say list, offer or revoke", errUsage)
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("grants "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	h := homeFlag(fs)
	switch sub {
	case "list":
		asJSON := fs.Bool("json", false, "print JSON")
		if err := parse(fs, args); err != nil {
			return err
		}
		c, err := newControl(*h)
		if err != nil {
			return err
		}
		var gs []accounting.GrantInfo
		if err := c.do(ctx, "GET", "/grants", nil, &gs); err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, gs)
		}
		for _, g := range gs {
			other := g.Grantee
			if g.Direction == "received" {
				other = g.Grantor
			}
			fmt.Fprintf(stdout, "%s %-8s %-8s %s %d %s per %ds until %s\n", g.ID, g.Direction, g.State, other, g.Quota, g.Service, g.WindowSecs, time.Unix(g.End, 0).UTC().Format(time.RFC3339))
		}
		return nil
	case "offer":
		to := fs.String("to", "", "grantee `DID`")
		svc := fs.String("service", "events", "service: events, bytes, storage_bytes, circuit_seconds, circuit_bytes, mediation_messages, compute_units")
		quota := fs.Uint64("quota", 0, "units per window; for mediation_messages, the leaf's queue size (default for events: [accounting] offer_events; required for other services)")
		length := fs.String("length", "", "how long the grant lasts (default: [accounting] grant_length)")
		notice := fs.String("notice", "", "revocation notice (default: [accounting] grant_notice)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *to == "" {
			return fmt.Errorf("%w: --to DID is required", errUsage)
		}
		s, ok := meter.ParseService(*svc)
		if !ok {
			return fmt.Errorf("%w: --service %q: one of %s", errUsage, *svc, strings.Join(meter.Names(), ", "))
		}
		if *quota == 0 && s != meter.Events {
			return fmt.Errorf("%w: --service %s needs --quota N: [accounting] offer_events is the default for events only", errUsage, s)
		}
		cfg, err := config.Load(home(*h).ConfigPath())
		if err != nil {
			return err
		}
		req := accounting.OfferRequest{To: *to, Service: *svc, Quota: *quota, Length: *length, Notice: *notice}
		if req.Quota == 0 {
			req.Quota = cfg.Accounting.OfferEvents
		}
		if req.Length == "" {
			req.Length = cfg.Accounting.GrantLength.String()
		}
		if req.Notice == "" {
			req.Notice = cfg.Accounting.GrantNotice.String()
		}
		c, err := newControl(*h)
		if err != nil {
			return err
		}
		var g accounting.GrantInfo
		if err := c.do(ctx, "POST", "/grants/offer", req, &g); err != nil {
			return err
		}
		return printJSON(stdout, g)
	case "revoke":
		id := fs.String("id", "", "grant `ID` (from grants list)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *id == "" {
			return fmt.Errorf("%w: --id ID is required", errUsage)
		}
		c, err := newControl(*h)
		if err != nil {
			return err
		}
		var g accounting.GrantInfo
		if err := c.do(ctx, "POST", "/grants/revoke", accounting.RevokeRequest{ID: *id}, &g); err != nil {
			return err
		}
		return printJSON(stdout, g)
	}
	return fmt.Errorf("%w: unknown grants command %q: list, offer or revoke", errUsage, sub)
}
