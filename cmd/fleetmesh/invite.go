package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
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
	register("invite", "print a signed join code (and link and QR) for this node: `run --join CODE` joins through it, `leaf --pair CODE` pairs with it", runInvite)
}

// inviteOutput is what `invite --json` prints.
type inviteOutput struct {
	Code  string   `json:"code"`
	Link  string   `json:"link"`
	DID   string   `json:"did"`
	Addrs []string `json:"addrs"`
	// Endpoint is the DIDComm endpoint a leaf pairs through, "" if the
	// code carries none.
	Endpoint string    `json:"endpoint,omitempty"`
	Expires  time.Time `json:"expires"`
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
	endpoint := fs.String("endpoint", "", "put this DIDComm `URL` in the code for leaves instead of the node's own relay (e.g. https://node.example.org/didcomm behind a proxy)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *endpoint != "" {
		if err := invite.CheckEndpoint(*endpoint); err != nil {
			return fmt.Errorf("%w: --endpoint: %v", errUsage, err)
		}
	}
	if *ttl <= 0 || *ttl > invite.MaxLifetime {
		return fmt.Errorf("%w: --ttl %s: want more than 0 and at most %s", errUsage, *ttl, invite.MaxLifetime)
	}
	key, err := loadKey(*dir)
	if err != nil {
		return err
	}
	out := inviteOutput{DID: key.DID(), Addrs: addrs, Endpoint: *endpoint, Source: "flags"}
	if len(out.Addrs) == 0 || out.Endpoint == "" {
		own, err := ownAddrs(ctx, *dir, key)
		if err != nil && len(out.Addrs) == 0 {
			return err
		}
		if len(out.Addrs) == 0 {
			if err := own.meshErr(*dir); err != nil {
				return err
			}
			out.Addrs, out.Source = own.mesh, own.source
		}
		if out.Endpoint == "" {
			out.Endpoint = own.endpoint
		}
	}
	out.Addrs = invite.Select(out.Addrs)
	out.Expires = time.Now().Add(*ttl).Truncate(time.Second)
	if out.Code, err = invite.New(key, out.Addrs, out.Endpoint, out.Expires); err != nil {
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
	if out.Endpoint != "" {
		fmt.Fprintf(stdout, "didcomm %s\n", out.Endpoint)
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
	if out.Endpoint != "" {
		fmt.Fprintf(stdout, "Pair a leaf with: fleetmesh leaf --pair %s\n", out.Code)
	}
	return nil
}

// nodeAddrs are where a node can be reached, as `invite` and `didcomm
// invite` put them in an invitation.
type nodeAddrs struct {
	mesh     []string // mesh multiaddrs, each with the node's /p2p/
	endpoint string   // DIDComm endpoint, "" if none can be told
	source   string   // "running" (the node's status) or "config"
}

// meshErr says why there is no mesh address, if there is none.
func (a nodeAddrs) meshErr(dir string) error {
	switch {
	case len(a.mesh) > 0:
		return nil
	case a.source == "running":
		return fmt.Errorf("the node running in %s listens on no mesh address: restart it with --mesh-listen (or [mesh] listen), or give --addr", dir)
	default:
		return fmt.Errorf("no node runs in %s and [mesh] listen names no address with a fixed port: start the node, or give --addr", dir)
	}
}

// ownAddrs reads the running node's mesh addresses and relay URL, as
// `status` reads them, or else the [mesh] listen names (each with the
// node's /p2p/) and the [relay] url or listen address.
func ownAddrs(ctx context.Context, dir string, key *identity.Key) (nodeAddrs, error) {
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	if st, err := node.ReadStatus(sctx, home(dir)); err == nil {
		return nodeAddrs{mesh: st.MeshAddrs, endpoint: didcommEndpoint(st.RelayURL), source: "running"}, nil
	}
	cfg, err := config.Load(home(dir).ConfigPath())
	if err != nil {
		return nodeAddrs{}, err
	}
	addrs, err := listenAddrs(cfg.Mesh.Listen, key)
	if err != nil {
		return nodeAddrs{}, err
	}
	relay := cfg.Relay.URL
	if relay == "" {
		relay = "ws://" + cfg.Relay.Listen
	}
	return nodeAddrs{mesh: addrs, endpoint: didcommEndpoint(relay), source: "config"}, nil
}

// didcommEndpoint is the DIDComm endpoint of the node whose relay is at
// relayURL (a node serves both on one port, at /didcomm), or "" if
// relayURL names no host another machine could dial (an unspecified
// address or port 0).
func didcommEndpoint(relayURL string) string {
	u, err := url.Parse(relayURL)
	if err != nil {
		return ""
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return ""
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() == "" || (ip != nil && ip.IsUnspecified()) || u.Port() == "0" {
		return ""
	}
	u.Path, u.RawQuery, u.Fragment = "/didcomm", "", ""
	if invite.CheckEndpoint(u.String()) != nil {
		return ""
	}
	return u.String()
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
