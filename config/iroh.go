package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"fleetmesh.org/fleetmesh/identity"
)

// IrohConfig configures the node's iroh endpoint (spec/iroh.md).
type IrohConfig struct {
	// Enabled runs the iroh endpoint beside libp2p (default true). A node
	// whose helper cannot run starts without it and says why.
	Enabled bool `toml:"enabled" comment:"run the iroh endpoint beside libp2p; without its helper the node starts without it and says why"`
	// Relays are iroh relay URLs (https://host/relay) this node uses
	// besides those it learns from anchors' descriptors. None is built in.
	Relays []string `toml:"relays" comment:"iroh relay URLs (https://host/relay) besides those learnt from anchors; none is built in"`
	// Bind are the UDP socket addresses (host:port) the endpoint binds;
	// empty binds an ephemeral port on every interface.
	Bind []string `toml:"bind" comment:"UDP addresses (host:port) the endpoint binds; [] is an ephemeral port on every interface"`
	// Peers are iroh endpoints to sync with: ENDPOINT_ID@HOST:PORT, with
	// more addresses after commas.
	Peers []string `toml:"peers" comment:"iroh endpoints to sync with: ENDPOINT_ID@HOST:PORT[,HOST:PORT...]"`
	// HelperDir holds helper.mjs and its modules (`npm install --no-save`); empty
	// is iroh/helper beside the fleetmesh executable.
	HelperDir string `toml:"helper_dir" comment:"directory of helper.mjs and its npm modules; '' is iroh/helper beside the executable"`
	// Node is the Node.js executable that runs the helper.
	Node string `toml:"node" comment:"the Node.js executable that runs the helper"`
	// The relay an anchor serves (config/irohrelay.go).
	IrohRelayConfig
}

// DefaultIroh is the [iroh] section's defaults.
func DefaultIroh() IrohConfig {
	return IrohConfig{Enabled: true, Relays: []string{}, Bind: []string{}, Peers: []string{}, Node: "node", IrohRelayConfig: DefaultIrohRelay()}
}

// IrohPeer is one [iroh] peers entry.
type IrohPeer struct {
	ID    string
	Addrs []string
}

// ParsePeers parses Peers.
func (c *IrohConfig) ParsePeers() ([]IrohPeer, error) {
	out := make([]IrohPeer, 0, len(c.Peers))
	for i, p := range c.Peers {
		id, addrs, _ := strings.Cut(p, "@")
		if _, err := identity.PublicKeyFromEndpointID(id); err != nil {
			return nil, fmt.Errorf("iroh.peers[%d] %q: %v (write ENDPOINT_ID@HOST:PORT, the id as `fleetmesh id` prints endpoint_id)", i, p, err)
		}
		peer := IrohPeer{ID: id}
		for _, a := range strings.Split(addrs, ",") {
			if a == "" {
				continue
			}
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("iroh.peers[%d] %q: address %q: %v (write HOST:PORT)", i, p, a, err)
			}
			peer.Addrs = append(peer.Addrs, a)
		}
		out = append(out, peer)
	}
	return out, nil
}

func (c *IrohConfig) validate() error {
	for i, r := range c.Relays {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("iroh.relays[%d] %q: must be an http(s) URL, e.g. https://anchor.example/relay", i, r)
		}
	}
	for i, b := range c.Bind {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("iroh.bind[%d] %q: %v (write HOST:PORT, port 0 for any)", i, b, err)
		}
	}
	if err := c.IrohRelayConfig.validate(); err != nil {
		return err
	}
	if c.Node == "" {
		return fmt.Errorf(`iroh.node is empty: name the Node.js executable (default "node")`)
	}
	_, err := c.ParsePeers()
	return err
}
