package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/receipt"
)

func init() {
	register("receipts", "print (and verify) a node's co-signed accounting receipts", runReceipts)
}

func runReceipts(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("receipts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	h := homeFlag(fs)
	did := fs.String("node", "", "`DID` whose receipts to show (default: the node's own)")
	asJSON := fs.Bool("json", false, "print a JSON array of receipts")
	verify := fs.Bool("verify", false, "verify the whole chain from each pair's first receipt; exit 1 naming what failed")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := newControl(*h)
	if err != nil {
		return err
	}
	own, err := loadKey(*h)
	if err != nil {
		return err
	}
	if *did == "" {
		*did = own.DID()
	}
	if !strings.HasPrefix(*did, "did:key:") {
		return fmt.Errorf("%w: --node %q: give a did:key DID", errUsage, *did)
	}
	// Another node's receipts: the running node first asks the mesh for
	// all of them (fetch=1), then every page of what it holds is read.
	q := url.Values{"node": {*did}}
	if *did != own.DID() {
		q.Set("fetch", "1")
	}
	var js []receipt.JSON
	for {
		var page []receipt.JSON
		hdr, err := c.doHeader(ctx, "GET", "/receipts?"+q.Encode(), nil, &page)
		if err != nil {
			return err
		}
		js = append(js, page...)
		next := hdr.Get(accounting.NextHeader)
		if next == "" || next == q.Get("after") {
			break
		}
		q.Del("fetch")
		q.Set("after", next)
	}
	if *asJSON {
		if err := printJSON(stdout, js); err != nil {
			return err
		}
	} else {
		for _, r := range js {
			prev := "null"
			if r.Prev != nil {
				prev = *r.Prev
			}
			fmt.Fprintf(stdout, "%s seq %d window %d prev %s a gave %d/%d b gave %d/%d events/bytes\n", r.CID, r.Seq, r.WindowStart, prev,
				r.CountsA.Gave.Events, r.CountsA.Gave.Bytes, r.CountsB.Gave.Events, r.CountsB.Gave.Bytes)
		}
	}
	if !*verify {
		return nil
	}
	// Verify from the canonical bytes alone, not the node's JSON view.
	rs := make([]*receipt.Receipt, 0, len(js))
	for i, j := range js {
		raw, err := base64.RawURLEncoding.DecodeString(j.Raw)
		if err != nil {
			return fmt.Errorf("verify: receipt %d: raw: %v", i, err)
		}
		r, err := receipt.Decode(raw)
		if err != nil {
			return fmt.Errorf("verify: receipt %d (seq %d): %v", i, j.Seq, err)
		}
		rs = append(rs, r)
	}
	n, err := receipt.VerifyChain(*did, rs)
	if err != nil {
		return fmt.Errorf("verify: %v", err)
	}
	if len(rs) == 0 {
		return fmt.Errorf("verify: no receipts of %s found here or on the mesh", *did)
	}
	fmt.Fprintf(stderr, "verified: %d receipts of %s: signatures, sequence, previous-CID links, settlement null\n", n, *did)
	return nil
}
