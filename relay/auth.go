package relay

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// handleAuth checks a NIP-42 AUTH event: kind 22242, signed, fresh, naming
// this connection's challenge and this relay. A connection may authenticate
// several keys.
func (c *conn) handleAuth(ev *nostr.Event) {
	id := ev.ID
	fail := func(msg string) {
		c.r.m.rejected.WithLabelValues("auth").Inc()
		c.ok(id, false, msg)
	}
	if ev.Kind != nostr.KindClientAuth {
		fail("invalid: an AUTH event must be kind 22242")
		return
	}
	if err := ev.Verify(); err != nil {
		fail("invalid: AUTH event " + err.Error())
		return
	}
	if ev.Tags.Value("challenge") != c.challenge {
		fail("invalid: AUTH challenge does not match the one this connection was sent")
		return
	}
	if !c.r.isOwnURL(ev.Tags.Value("relay"), c.host) {
		fail("invalid: AUTH relay tag does not name this relay")
		return
	}
	if d := time.Duration(c.r.now().Unix()-ev.CreatedAt) * time.Second; d > c.r.cfg.AuthWindow || -d > c.r.cfg.AuthWindow {
		fail("invalid: AUTH event created_at is too far from now; check the device clock")
		return
	}
	c.mu.Lock()
	c.authed[ev.PubKey] = struct{}{}
	c.mu.Unlock()
	c.ok(id, true, "")
}

// isOwnURL compares a relay URL from an AUTH event with the configured URL
// and with the Host the client connected to, ignoring the scheme and a
// trailing slash, since clients differ on both.
func (r *Relay) isOwnURL(got, connHost string) bool {
	u, err := url.Parse(strings.TrimSpace(got))
	if err != nil || u.Host == "" {
		return false
	}
	norm := func(u *url.URL) string { return strings.ToLower(u.Host) + strings.TrimSuffix(u.Path, "/") }
	want := []string{strings.ToLower(connHost)}
	if r.cfg.URL != "" {
		if cu, err := url.Parse(r.cfg.URL); err == nil {
			want = append(want, norm(cu))
		}
	}
	return slices.Contains(want, norm(u))
}

// canRead reports whether this connection may receive an event of a kind
// that needs authentication: it must have authenticated as the author or
// as a key the event tags with "p".
// restrictedKind reports whether events of kind are readable only by the
// parties canRead names.
func (c *conn) restrictedKind(kind int) bool {
	return slices.Contains(c.r.cfg.AuthRequiredKinds, kind)
}

func (c *conn) canRead(ev *nostr.Event) bool {
	if !slices.Contains(c.r.cfg.AuthRequiredKinds, ev.Kind) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.authed[ev.PubKey]; ok {
		return true
	}
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" {
			var pk [32]byte
			if nostr.DecodeHex(pk[:], t[1]) == nil {
				if _, ok := c.authed[pk]; ok {
					return true
				}
			}
		}
	}
	return false
}
