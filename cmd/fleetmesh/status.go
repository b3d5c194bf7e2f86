package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/node"
)

func init() {
	register("status", "show a running node's identity, reachability, peers, shards, storage and recent errors", runStatus)
}

// statusTimeout bounds the one request to the node.
const statusTimeout = 10 * time.Second

func runStatus(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := homeFlag(fs)
	asJSON := fs.Bool("json", false, "print the status as one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("%w: --home DIR is required", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := node.ReadStatus(ctx, home(*dir))
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(st)
	}
	printStatus(stdout, st)
	return nil
}

// printIroh prints the iroh line: state, EndpointId, addresses, relay and
// connections by path.
func printIroh(w io.Writer, st node.StatusIroh) {
	switch st.State {
	case "off":
		fmt.Fprintf(w, "iroh          off: %s\n", st.Why)
		return
	case "starting":
		fmt.Fprintf(w, "iroh          starting (the helper is not serving yet; %d restarts): %s\n", st.HelperRestarts, st.EndpointID)
		return
	}
	relay := st.RelayURL
	if relay == "" {
		relay = "none"
	}
	c := st.Connections
	fmt.Fprintf(w, "iroh          up: %s at %s; relay %s (of %d known); connections %d direct, %d relayed, %d without a path\n",
		st.EndpointID, strings.Join(st.Addrs, " "), relay, len(st.Relays), c["direct"], c["relay"], c["none"])
}

func printStatus(w io.Writer, st node.Status) {
	fmt.Fprintf(w, "version       %s\n", st.Version)
	fmt.Fprintf(w, "did           %s\n", st.DID)
	fmt.Fprintf(w, "peer_id       %s\n", st.PeerID)
	fmt.Fprintf(w, "class         %s (configured %s)\n", st.Class, st.ClassConfig)
	relay := "off"
	if st.RelayService {
		relay = "on"
	}
	fmt.Fprintf(w, "reachability  %s (relay service %s; reservations with %d relays)\n", st.Reachability, relay, len(st.Relays))
	fmt.Fprintf(w, "relay         %s\n", st.RelayURL)
	for _, a := range st.MeshAddrs {
		fmt.Fprintf(w, "mesh          %s\n", a)
	}
	var kinds []string
	for _, k := range st.PeerKinds {
		kinds = append(kinds, fmt.Sprintf("%d %s over %s", k.Count, k.Class, k.Transport))
	}
	fmt.Fprintf(w, "peers         %d connected", st.Peers)
	if len(kinds) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(kinds, ", "))
	}
	fmt.Fprintf(w, "; %d in the address book\n", st.AddressBookPeers)
	printIroh(w, st.Iroh)
	sh := st.Shards
	fmt.Fprintf(w, "shards        %d subscribed, %d held for durability; %s\n",
		sh.Subscribed, len(sh.Durable), replicationWords(sh))
	fmt.Fprintf(w, "storage       %s\n", storageLine(st.Storage))
	fmt.Fprintf(w, "sync          %s\n", catchUpLine(st.Sync))
	if gw := st.Gateway; gw != nil {
		fmt.Fprintf(w, "gateway       backend %s\n", gw.Backend)
		for _, dir := range []string{"to_mesh", "to_backend"} {
			if sy, ok := gw.CatchUp[dir]; ok {
				fmt.Fprintf(w, "gateway       %s %s\n", dir, catchUpLine(sy))
			}
		}
	}
	printFrontEnds(w, st)
	fmt.Fprintf(w, "uptime        %s\n", time.Duration(st.UptimeSeconds)*time.Second)
	if len(st.Errors) == 0 {
		fmt.Fprintln(w, "errors        none")
		return
	}
	fmt.Fprintf(w, "errors        the last %d kinds, oldest first, one line each (fleetmesh status --json has them in full):\n", len(st.Errors))
	for _, e := range st.Errors {
		fmt.Fprintln(w, errorLine(e))
	}
}

// replicationWords says how many shards lack R copies and whether that is
// expected: with fewer storage nodes than R, no shard can have R copies.
func replicationWords(sh node.StatusShards) string {
	below := fmt.Sprintf("%d of all below R=%d over %d storage nodes", sh.BelowReplication, sh.Replication, sh.StorageNodes)
	switch {
	case sh.BelowReplication == 0:
		return fmt.Sprintf("every shard has R=%d copies over %d storage nodes", sh.Replication, sh.StorageNodes)
	case sh.StorageNodes < sh.Replication:
		return below + " (expected: the mesh has fewer storage nodes than R, so no shard can have R copies until more join)"
	default:
		return below + " (being repaired; if it stays, storage nodes were lost: check peers and errors)"
	}
}

// maxErrorLine bounds one error's line in the text status.
const maxErrorLine = 200

// errorLine is one logged error on one line: its time, level, message,
// count and attributes, newlines folded and the whole cut to
// maxErrorLine characters.
func errorLine(e node.StatusError) string {
	var attrs []string
	for k, v := range e.Attrs {
		attrs = append(attrs, k+"="+v)
	}
	sort.Strings(attrs)
	l := fmt.Sprintf("  %s %-5s %s", e.Time.UTC().Format(time.RFC3339), e.Level, e.Message)
	if e.Count > 1 {
		l += fmt.Sprintf(" (×%d)", e.Count)
	}
	if len(attrs) > 0 {
		l += " " + strings.Join(attrs, " ")
	}
	l = strings.Join(strings.Fields(l), " ")
	if r := []rune(l); len(r) > maxErrorLine {
		l = string(r[:maxErrorLine-1]) + "…"
	}
	return "  " + l
}

// catchUpLine says how far a catch-up is, or how the last one went.
func catchUpLine(sy node.StatusSync) string {
	switch {
	case sy.Active:
		return fmt.Sprintf("catching up: %d of about %d events moved, %.0f a second, about %s left",
			sy.Moved, sy.Total, sy.PerSecond, time.Duration(sy.LeftSeconds)*time.Second)
	case !sy.Started.IsZero():
		return fmt.Sprintf("caught up: the last catch-up moved %d events in %s",
			sy.Moved, time.Duration(sy.ElapsedSeconds)*time.Second)
	default:
		return "nothing to move yet"
	}
}

// storageLine says storage used as the bound counts it (the figure
// /metrics and the dashboard show too), of the bound, and the files'
// lengths as a second, differently named figure.
func storageLine(s node.StatusStorage) string {
	used := fmt.Sprintf("%s used", bytesText(s.Bytes))
	if s.MaxBytes > 0 {
		used += fmt.Sprintf(" of %s (%.1f %%)", bytesText(s.MaxBytes), 100*float64(s.Bytes)/float64(s.MaxBytes))
	} else {
		used += ", no bound (storage_max_bytes = 0)"
	}
	if s.Dir == "postgres" {
		return used + " in PostgreSQL (the database's size)"
	}
	return fmt.Sprintf("%s in %s; the files' lengths add up to %s", used, s.Dir, bytesText(s.FileBytes))
}

// printFrontEnds lists a node's front-ends over PostgreSQL, one line
// each, the mesh role's holder marked.
func printFrontEnds(w io.Writer, st node.Status) {
	if len(st.FrontEnds) == 0 {
		return
	}
	role := "this front-end does not hold the mesh role"
	if st.MeshRole {
		role = "this front-end holds the mesh role"
	}
	fmt.Fprintf(w, "front-ends    %d over PostgreSQL; %s\n", len(st.FrontEnds), role)
	for _, f := range st.FrontEnds {
		mark := ""
		if f.MeshRole {
			mark = " [mesh role]"
		}
		if f.Stale {
			mark += " [stale: no heartbeat since " + f.Heartbeat.UTC().Format(time.RFC3339) + "]"
		}
		fmt.Fprintf(w, "front-end     %s %s pid %d%s\n", f.Name, f.RelayURL, f.PID, mark)
	}
}

// bytesText is n in bytes with its decimal-prefixed size when large.
func bytesText(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, prefix := float64(n), ""
	for _, p := range []string{"kB", "MB", "GB", "TB", "PB"} {
		v /= unit
		prefix = p
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%d bytes (%.1f %s)", n, v, prefix)
}
