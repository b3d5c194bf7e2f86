package node

import (
	"fmt"
	"net/http"
	"sync"
)

// healthChecks serves /healthz: "ok" while every check is healthy, else
// 503 with each check's status on its own line, so an operator (or a load
// balancer) sees why in the words of whatever failed.
type healthChecks struct {
	mu     sync.Mutex
	checks []healthCheck
}

type healthCheck struct {
	name string
	fn   func() (status string, healthy bool)
}

// AddHealth adds a check to /healthz. fn is called on every request; its
// status is printed after name (also while healthy, when it is not "ok").
func (n *Node) AddHealth(name string, fn func() (status string, healthy bool)) {
	n.health.mu.Lock()
	n.health.checks = append(n.health.checks, healthCheck{name, fn})
	n.health.mu.Unlock()
}

func (h *healthChecks) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	body, healthy := h.summary()
	code := http.StatusOK
	if !healthy {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(code)
	w.Write([]byte(body))
}

// summary is /healthz's text and verdict: "ok" and the checks whose
// status is not "ok" when healthy, else the checks' statuses.
func (h *healthChecks) summary() (string, bool) {
	h.mu.Lock()
	checks := append([]healthCheck(nil), h.checks...)
	h.mu.Unlock()
	body, code := "", http.StatusOK
	for _, c := range checks {
		status, ok := c.fn()
		if !ok {
			code = http.StatusServiceUnavailable
		}
		if status != "ok" || !ok {
			body += fmt.Sprintf("%s: %s\n", c.name, status)
		}
	}
	if code == http.StatusOK {
		body = "ok\n" + body
	}
	return body, code == http.StatusOK
}
