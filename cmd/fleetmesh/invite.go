package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/didcomm/oob"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/invite"
	"fleetmesh.org/fleetmesh/node"
)

func init() {
	register("invite", "print a signed join code (and link and QR) for this node's mesh addresses: `run --join CODE` joins through it", runInvite)
}

// inviteOutput is what `invite --json` prints.
type inviteOutput struct {
	Code    string    `json:"code"`
	Link    string    `json:"link"`
	DID     string    `json:"did"`
	Addrs   []string  `json:"addrs"`
	Expires time.Time `json:"expires"`
	// Source says where the addresses came from: "running" (the node's
	// status), "config" ([mesh] listen) or "flags" (--addr).
	Source string `json:"source"`
}

func runInvite(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("invite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := homeFlag(fs)
	asJSON := fs.Bool("json", false, "print the code, link, DID, addresses and expiry as one JSON object (no QR)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the code is accepted (at most 720h)")
	noQR := fs.Bool("no-qr", false, "do not draw the QR code")
	var addrs stringList
	fs.Var(&addrs, "addr", "put this mesh `MULTIADDR` in the code instead of the node's own (repeatable; e.g. a public address behind port forwarding)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ttl <= 0 || *ttl > invite.MaxLifetime {
		return fmt.Errorf("%w: --ttl %s: want more than 0 and at most %s", errUsage, *ttl, invite.MaxLifetime)
	}
	key, err := loadKey(*dir)
	if err != nil {
		return err
	}
	out := inviteOutput{DID: key.DID(), Addrs: addrs, Source: "flags"}
	if len(out.Addrs) == 0 {
		out.Addrs, out.Source, err = inviteAddrs(ctx, *dir, key)
		if err != nil {
			return err
		}
	}
	out.Addrs = invite.Select(out.Addrs)
	out.Expires = time.Now().Add(*ttl).Truncate(time.Second)
	if out.Code, err = invite.New(key, out.Addrs, out.Expires); err != nil {
		return err
	}
	out.Link = invite.Link(out.Code)
	if *asJSON {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "code    %s\nlink    %s\nexpires %s\n", out.Code, out.Link, out.Expires.UTC().Format(time.RFC3339))
	for _, a := range out.Addrs {
		fmt.Fprintf(stdout, "mesh    %s\n", a)
	}
	if *noQR {
		return nil
	}
	// Upper case: QR's alphanumeric mode takes it in fewer modules, and
	// bech32 reads either case.
	qr, err := oob.QR(strings.ToUpper(out.Link))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\nJoin with: fleetmesh run --join %s\n", qr, out.Code)
	return nil
}

// inviteAddrs are the running node's mesh addresses, as `status` reads
// them, or else those [mesh] listen names, each with the node's /p2p/.
func inviteAddrs(ctx context.Context, dir string, key *identity.Key) ([]string, string, error) {
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	if st, err := node.ReadStatus(sctx, home(dir)); err == nil {
		if len(st.MeshAddrs) == 0 {
			return nil, "", fmt.Errorf("the node running in %s listens on no mesh address: restart it with --mesh-listen (or [mesh] listen), or give --addr", dir)
		}
		return st.MeshAddrs, "running", nil
	}
	cfg, err := config.Load(home(dir).ConfigPath())
	if err != nil {
		return nil, "", err
	}
	addrs, err := listenAddrs(cfg.Mesh.Listen, key)
	if err != nil {
		return nil, "", err
	}
	if len(addrs) == 0 {
		return nil, "", fmt.Errorf("no node runs in %s and [mesh] listen names no address with a fixed port: start the node, or give --addr", dir)
	}
	return addrs, "config", nil
}

// listenAddrs turns listen multiaddrs into dialable ones: an unspecified
// IP (0.0.0.0, ::) becomes each interface address, and port 0 (picked at
// start) is left out, since nobody could dial it.
func listenAddrs(listen []string, key *identity.Key) ([]string, error) {
	var parsed []ma.Multiaddr
	for _, s := range listen {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("[mesh] listen %q: %w", s, err)
		}
		if hasPortZero(a) {
			continue
		}
		parsed = append(parsed, a)
	}
	if len(parsed) == 0 {
		return nil, nil
	}
	ifaces, err := manet.InterfaceMultiaddrs()
	if err != nil {
		return nil, fmt.Errorf("interface addresses: %w", err)
	}
	resolved, err := manet.ResolveUnspecifiedAddresses(parsed, ifaces)
	if err != nil {
		return nil, fmt.Errorf("[mesh] listen: %w", err)
	}
	var out []string
	for _, a := range resolved {
		out = append(out, a.String()+"/p2p/"+key.PeerID().String())
	}
	return out, nil
}

func hasPortZero(a ma.Multiaddr) bool {
	for _, p := range []int{ma.P_TCP, ma.P_UDP} {
		if v, err := a.ValueForProtocol(p); err == nil && v == "0" {
			return true
		}
	}
	return false
}
