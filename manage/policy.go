package manage

import (
	"context"
	"net/netip"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// RelayHook is the lists' relay.RejectFunc: bans hold for every origin,
// the allowed pubkeys and kinds for the node's own clients only.
func (l *Lists) RelayHook(m *Metrics) relay.RejectFunc {
	return func(ctx context.Context, ev *nostr.Event) string {
		client := relay.OriginOf(ctx) == relay.FromClient
		if r := l.EventRefusal(ev.ID); r != "" {
			m.refused("event_banned")
			return r
		}
		if r := l.PubkeyRefusal(ev.PubKey, client); r != "" {
			m.refused("pubkey")
			return r
		}
		if client {
			if r := l.KindRefusal(ev.Kind); r != "" {
				m.refused("kind")
				return r
			}
		}
		return ""
	}
}

// ClientHook is the lists' relay.RefuseClient: a blocked address's
// upgrades are refused.
func (l *Lists) ClientHook(m *Metrics) func(client string) string {
	return func(client string) string {
		a, ok := clientAddr(client)
		if !ok {
			return ""
		}
		if r := l.AddrRefusal(a); r != "" {
			m.refused("address")
			return r
		}
		return ""
	}
}

// ClientIn reports whether a client address (as relay.RefuseClient is
// given it) is inside p.
func ClientIn(client string, p netip.Prefix) bool {
	a, ok := clientAddr(client)
	return ok && p.Contains(a)
}

func clientAddr(client string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(client); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(client); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}
