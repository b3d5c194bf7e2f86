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

	"fleetmesh.org/fleetmesh/label"
	"fleetmesh.org/fleetmesh/node"
)

func init() {
	register("label", "publish a label by this node: an author, event, blob or node, with a reason (spec/labels.md)", runLabel)
	register("why", "show the labels and labellers behind a refusal, or behind any event, author or node", runWhy)
}

func runLabel(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("label", flag.ContinueOnError)
	fs.SetOutput(stderr)
	h := homeFlag(fs)
	var req node.LabelRequest
	fs.StringVar(&req.Author, "author", "", "Nostr `PUBKEY` (64 hex) of the author to label")
	fs.StringVar(&req.Event, "event", "", "`ID` (64 hex) of the event to label")
	fs.StringVar(&req.Blob, "blob", "", "`SHA256` (64 hex) of the blob to label")
	fs.StringVar(&req.Node, "node", "", "`DID` of the node to label misbehaving (needs a window this node reported disputed with it)")
	fs.StringVar(&req.Dispute, "dispute", "", "with --node: `CID` of the disputed receipt behind the label (default: the newest with that node)")
	fs.StringVar(&req.Reason, "reason", "", "one of spam, nudity, malware, profanity, illegal, impersonation, other (misbehaving for --node, the default there)")
	fs.StringVar(&req.Note, "note", "", "free text for people, at most 1,024 bytes")
	expires := fs.Duration("expires", 0, "how long the label holds, e.g. 720h (default: until retracted)")
	retract := fs.String("retract", "", "retract the label of this `ID` instead (a NIP-09 deletion by this node's label key)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var ans node.LabelAnswer
	if *retract != "" {
		c, err := newControl(*h)
		if err != nil {
			return err
		}
		if err := c.do(ctx, "POST", "/labels/retract", node.LabelAnswer{ID: *retract}, &ans); err != nil {
			return err
		}
		fmt.Fprintln(stdout, ans.ID)
		return nil
	}
	if req.Node != "" && req.Reason == "" {
		req.Reason = string(label.Misbehaving)
	}
	if req.Reason == "" {
		return fmt.Errorf("%w: --reason is required: one of spam, nudity, malware, profanity, illegal, impersonation, other", errUsage)
	}
	if _, err := label.ParseReason(req.Reason); err != nil {
		return fmt.Errorf("%w: --%v", errUsage, err)
	}
	if *expires < 0 {
		return fmt.Errorf("%w: --expires %s: give a positive duration, e.g. 720h", errUsage, *expires)
	}
	req.Expires = int64(expires.Seconds())
	c, err := newControl(*h)
	if err != nil {
		return err
	}
	if err := c.do(ctx, "POST", "/labels", req, &ans); err != nil {
		return err
	}
	fmt.Fprintln(stdout, ans.ID)
	return nil
}

func runWhy(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("why", flag.ContinueOnError)
	fs.SetOutput(stderr)
	h := homeFlag(fs)
	event := fs.String("event", "", "`ID` (64 hex) of the event: its author is found from the refusal or the store")
	author := fs.String("author", "", "Nostr `PUBKEY` (64 hex) of an author")
	nodeDID := fs.String("node", "", "`DID` of a node")
	held := fs.Bool("held", false, "also list the events held for review under [labels] policy = \"hold\"")
	asJSON := fs.Bool("json", false, "print JSON: {event, author, refused, policy, threshold, verdicts, held}")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *event == "" && *author == "" && *nodeDID == "" && !*held {
		return fmt.Errorf("%w: give --event ID, --author PUBKEY, --node DID or --held", errUsage)
	}
	c, err := newControl(*h)
	if err != nil {
		return err
	}
	q := url.Values{}
	if *held {
		q.Set("held", "1")
	}
	for k, v := range map[string]string{"event": *event, "author": *author, "node": *nodeDID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var why node.Why
	if err := c.do(ctx, "GET", "/labels/why?"+q.Encode(), nil, &why); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, why)
	}
	if why.Event != "" {
		state := "not refused for labels (or no longer remembered)"
		if why.Refused {
			state = "refused"
		}
		fmt.Fprintf(stdout, "event %s: %s\n", why.Event, state)
	}
	fmt.Fprintf(stdout, "policy %s, threshold %.4g\n", why.Policy, why.Threshold)
	if *held {
		fmt.Fprintf(stdout, "%d events held for review\n", len(why.Held))
		for _, id := range why.Held {
			fmt.Fprintf(stdout, "  %s\n", id)
		}
	}
	for _, v := range why.Verdicts {
		verdict := "below the threshold"
		if v.Passes() {
			verdict = "at or past the threshold"
		}
		fmt.Fprintf(stdout, "\n%s %s: sum %.4g, %s (rule labels.%s)\n", v.Rule, strings.SplitN(v.Target, ":", 2)[1], v.Sum, verdict, v.Rule)
		if len(v.Labels) == 0 {
			fmt.Fprintln(stdout, "  no labels held")
			continue
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  LABEL\tLABELLER\tWEIGHT\tREASON\tCREATED\tNOTE\tIGNORED")
		for _, l := range v.Labels {
			fmt.Fprintf(tw, "  %s\t%s\t%.4g\t%s\t%s\t%s\t%s\n", l.ID, l.Labeller, l.Weight, l.Reason,
				time.Unix(l.Created, 0).UTC().Format(time.RFC3339), l.Note, l.Ignored)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
