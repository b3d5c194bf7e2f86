package relay

import (
	"net"
	"net/netip"
)

// addrKey names the party behind a remote address for per-address limits.
// An IPv4 address is one party. An IPv6 host usually holds a whole /64
// (SLAAC, privacy addresses) and a site often a /56, so one IPv6 client
// could otherwise take a fresh address for every connection: it is keyed
// by its /64 (narrow) and, for a looser second cap, its /56 (wide).
type addrKey struct {
	narrow string
	wide   string // empty for IPv4
}

// keyOf returns the key of a "host:port" or bare host address. Something
// that is no IP address (a Unix socket, a test's fake address) is its own
// key.
func keyOf(remote string) addrKey {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return addrKey{narrow: host}
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return addrKey{narrow: ip.String()}
	}
	p64, _ := ip.Prefix(64)
	p56, _ := ip.Prefix(56)
	return addrKey{narrow: p64.String(), wide: p56.String()}
}
