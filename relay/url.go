package relay

import (
	"net"
	"net/netip"
)

// LocalURL is the ws:// URL a client on this host dials to reach a relay
// listening at addr. A wildcard address (0.0.0.0, ::) is not one a client
// can dial, so it becomes the loopback address of the same family; the
// URL others should use is the operator's `relay.url`, which the node
// cannot guess (spec/relay.md).
func LocalURL(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return "ws://" + addr.String()
	}
	ip := ap.Addr()
	if ip.IsUnspecified() {
		if ip.Is4() || ip.Is4In6() {
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		} else {
			ip = netip.IPv6Loopback()
		}
	}
	return "ws://" + netip.AddrPortFrom(ip.Unmap(), ap.Port()).String()
}
