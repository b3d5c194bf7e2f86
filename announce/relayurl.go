package announce

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// CheckRelayURL accepts a relay URL to announce to or join through:
// wss://, or ws:// to a loopback host only, since an announcement read
// over plain ws:// across a network could be withheld or replaced by
// anyone on the path (its descriptor cannot be forged, but the relay's
// answer can be emptied).
func CheckRelayURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("announce: relay URL %q: %w", s, err)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("announce: relay URL %q: want wss://host[:port][/path]", s)
	}
	switch u.Scheme {
	case "wss":
		return nil
	case "ws":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("announce: relay URL %q: ws:// only to a loopback host; use wss://", s)
	}
	return fmt.Errorf("announce: relay URL %q: want wss:// (or ws:// on loopback)", s)
}

// IsRelayURL says whether s is meant as a relay URL (by its scheme), so
// `--join` can tell a relay from a join code before checking either.
func IsRelayURL(s string) bool {
	s = strings.ToLower(s)
	return strings.HasPrefix(s, "ws://") || strings.HasPrefix(s, "wss://")
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && net.IP(ip.AsSlice()).IsLoopback()
}
