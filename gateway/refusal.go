package gateway

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"fleetmesh.org/fleetmesh/nostr"
)

// A backend that cannot parse a REQ answers it with NOTICE (or CLOSED)
// instead of EOSE; khatru v0.17.0 does so for every filter with limit,
// since or until. The gateway then degrades to plain filters (the same
// filters without limit, since and until), which every NIP-01 parser
// reads: wider than asked, so every event is checked against the
// configured filters again before it crosses. A backend that refuses the
// plain shape too is refusing reads: one ERROR with its words, the state
// in /metrics and Health, and the session keeps only the mesh → backend
// direction until a backoff step ends it and the next connection asks
// again.

// refusal is a REQ the backend answered with NOTICE or CLOSED in the plain
// shape: nothing simpler can be asked.
type refusal struct {
	what string // "live", "catch-up", "fetch"
	text string // the backend's words
}

func (r *refusal) Error() string {
	return fmt.Sprintf("gateway: the backend refuses %s REQs even without limit, since and until; it said %q", r.what, r.text)
}

// errShape is a REQ refused in the full shape; the caller asks again in
// the plain one.
var errShape = errors.New("backend refused the filter shape")

// plainShape is f without limit, since and until.
func plainShape(f nostr.Filter) nostr.Filter {
	f.Since = 0
	f.Until, f.HasUntil = 0, false
	f.Limit, f.HasLimit = 0, false
	return f
}

// health is what Health reports: degraded (plain shapes in use) and the
// last refusal, with the backend's words.
type health struct {
	mu       sync.Mutex
	degraded string // the NOTICE or CLOSED that made the gateway degrade
	refused  string // the refusal's message; "" once a session caught up
}

// Health says how the gateway stands with its backend, for /healthz:
// healthy is false while the backend refuses reads in every shape; status
// says why in the backend's own words, or that the gateway degraded to
// plain filters, or "ok".
func (g *Gateway) Health() (status string, healthy bool) {
	g.health.mu.Lock()
	defer g.health.mu.Unlock()
	var parts []string
	if g.health.refused != "" {
		parts = append(parts, "refused: "+g.health.refused)
	}
	if g.health.degraded != "" {
		parts = append(parts, fmt.Sprintf("degraded: the backend refused filters with limit/since/until (it said %q); catching up with plain filters, limited to what it serves per REQ", g.health.degraded))
	}
	if len(parts) == 0 {
		return "ok", true
	}
	return strings.Join(parts, "; "), g.health.refused == ""
}

// degrade records that the backend refused the full shape, once per
// distinct message.
func (g *Gateway) degrade(s *session, what, text string) {
	s.plain = true
	g.m.refusals.WithLabelValues(what, "full").Inc()
	g.m.degraded.Set(1)
	g.health.mu.Lock()
	first := g.health.degraded != text
	g.health.degraded = text
	g.health.mu.Unlock()
	if first {
		g.log.Warn("gateway: the backend cannot parse REQs with limit, since or until; degrading to plain filters (wider, filtered here)", "backend", g.s.Backend, "request", what, "backend_said", text)
	}
}

// refused records a refusal in the plain shape: one ERROR per distinct
// message, however often the gateway asks again.
func (g *Gateway) refused(r *refusal) {
	g.m.refusals.WithLabelValues(r.what, "plain").Inc()
	g.m.refusing.Set(1)
	g.health.mu.Lock()
	first := g.health.refused != r.Error()
	g.health.refused = r.Error()
	g.health.mu.Unlock()
	if first {
		g.log.Error("gateway: the backend refuses to serve reads; carrying only mesh → backend and retrying with backoff", "backend", g.s.Backend, "request", r.what, "backend_said", r.text)
	}
}

// caughtUp clears a refusal after a session read from the backend again.
func (g *Gateway) caughtUp() {
	g.m.refusing.Set(0)
	g.health.mu.Lock()
	g.health.refused = ""
	g.health.mu.Unlock()
}
