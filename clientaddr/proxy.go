package clientaddr

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies (nginx, Caddy) an operator puts in front
// of the node, as address prefixes. A request from one of them is keyed by
// the client it forwarded for, read from X-Forwarded-For, not by the
// proxy's own address; a request from anywhere else is keyed by its
// address whatever its headers say, since a client can write any header.
type Proxies []Proxy

// Proxy is one reverse proxy's address prefix. It reads from text as a
// CIDR prefix or a bare address (`relay.trusted_proxies` in config.toml),
// so the file's list decodes straight into Proxies.
type Proxy struct {
	netip.Prefix
}

// UnmarshalText parses a CIDR prefix or a bare address, which stands for
// itself alone.
func (p *Proxy) UnmarshalText(b []byte) error {
	s := string(b)
	if pr, err := netip.ParsePrefix(s); err == nil {
		p.Prefix = pr.Masked()
		return nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("%q is not an address or CIDR prefix (write e.g. \"127.0.0.1/32\" or \"::1\")", s)
	}
	p.Prefix = netip.PrefixFrom(a, a.BitLen())
	return nil
}

// MarshalText writes the prefix in CIDR form.
func (p Proxy) MarshalText() ([]byte, error) { return p.Prefix.MarshalText() }

// ParseProxies parses CIDR prefixes or bare addresses, as Proxy's
// UnmarshalText does.
func ParseProxies(specs []string) (Proxies, error) {
	out := make(Proxies, len(specs))
	for i, s := range specs {
		if err := out[i].UnmarshalText([]byte(s)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Trusted reports whether remote ("host:port" or a bare host) is one of
// the proxies.
func (p Proxies) Trusted(remote string) bool {
	if len(p) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(strings.TrimSpace(host))
	if err != nil {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, pr := range p {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the address of the client behind a request that arrived from
// remote with header h: remote itself unless remote is a proxy, else the
// right-most X-Forwarded-For entry that is not a proxy (entries left of it
// were written by whoever the proxy forwarded for, and can be anything).
func (p Proxies) Client(remote string, h http.Header) string {
	if !p.Trusted(remote) {
		return remote
	}
	hops := strings.Split(strings.Join(h.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		if !p.Trusted(hop) {
			if _, err := netip.ParseAddr(hop); err != nil {
				return remote
			}
			return hop
		}
	}
	return remote
}

// OfRequest is the key of the client behind r.
func (p Proxies) OfRequest(r *http.Request) Key { return Of(p.Client(r.RemoteAddr, r.Header)) }
