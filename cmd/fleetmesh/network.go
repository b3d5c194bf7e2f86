package main

import (
	"fmt"
	"net"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/mesh"
)

// networkLine says in one line, at start, where the node listens (the
// relay and the mesh, and whether that is this machine only or every
// interface) and whether it announces itself on the LAN by mDNS, with the
// settings that change both: what an operator of a laptop needs to keep
// its node to itself.
func networkLine(cfg config.Config, mdns mesh.MDNSMode) string {
	relay := cfg.Relay.Listen + " (" + hostScope(cfg.Relay.Listen) + ")"
	meshPart := "mesh listens nowhere (dials out only)"
	if len(cfg.Mesh.Listen) > 0 {
		scope := "this machine only"
		for _, l := range cfg.Mesh.Listen {
			if s := multiaddrScope(l); s != scope {
				scope = s
				break
			}
		}
		meshPart = "mesh " + strings.Join(cfg.Mesh.Listen, " ") + " (" + scope + ")"
	}
	var lan string
	switch mdns {
	case mesh.MDNSOn:
		lan = "announces itself on the LAN by mDNS"
	case mesh.MDNSWhilePrivate:
		lan = "announces itself on the LAN by mDNS while home class"
	default:
		lan = "does not announce itself on the LAN (mDNS off)"
	}
	return fmt.Sprintf("network relay %s; %s; %s. To keep it to this machine: [relay] listen = %q, [mesh] listen = [\"/ip4/127.0.0.1/tcp/4001\"], [mesh] mdns = 'off' (config.toml)",
		relay, meshPart, lan, config.DefaultListen)
}

// hostScope says who can reach host:port.
func hostScope(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return "unknown"
	}
	return ipScope(net.ParseIP(host), host)
}

func multiaddrScope(s string) string {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return "unknown"
	}
	ip, err := manet.ToIP(a)
	if err != nil {
		return "every interface" // a DNS name or another transport
	}
	return ipScope(ip, "")
}

func ipScope(ip net.IP, host string) string {
	switch {
	case ip == nil && (host == "" || host == "localhost"):
		if host == "localhost" {
			return "this machine only"
		}
		return "every interface"
	case ip == nil:
		return "the interfaces of " + host
	case ip.IsLoopback():
		return "this machine only"
	case ip.IsUnspecified():
		return "every interface"
	}
	return "the interface with " + ip.String()
}
