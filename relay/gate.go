package relay

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/clientaddr"
)

// gate counts the TCP connections the relay's listener has accepted and
// not yet closed, per address and in all, and refuses one over either cap
// right at accept, before net/http reads a byte: a connection that never
// finishes its handshake (slowloris) still counts, so one address cannot
// hold the process's descriptors with half-open requests.
//
// Its caps sit a little above the WebSocket caps that serveWebSocket
// enforces, so that a client at its WebSocket limit still gets a readable
// HTTP 429 at the upgrade and can fetch NIP-11.
type gate struct {
	perAddr int // per IPv4 address or IPv6 /64
	perWide int // per IPv6 /56
	total   int

	mu     sync.Mutex
	counts map[string]int
	n      int

	// refusing bounds the refusals being written at once; over it a
	// connection is closed without a word, so refusing costs at most this
	// many descriptors.
	refusing chan struct{}
	m        *metrics
}

// gateSlack is how many connections above its WebSocket cap an address
// may hold at accept, for NIP-11 requests and readable refusals.
const gateSlack = 8

func newGate(cfg *Config, m *metrics) *gate {
	return &gate{
		perAddr:  cfg.MaxConnsPerIP + gateSlack,
		perWide:  cfg.MaxConnsPerIP*ipv6WideFactor + gateSlack,
		total:    cfg.MaxConns + cfg.spareConns(),
		counts:   make(map[string]int),
		refusing: make(chan struct{}, max(4, cfg.spareConns()/2)),
		m:        m,
	}
}

// ipv6WideFactor: an IPv6 /56 may hold this many times an address's
// connections (a site with several hosts).
const ipv6WideFactor = 4

// open counts a connection from k, or says why not: "" if admitted. The
// zero Key (a trusted proxy's connection) counts toward the total only.
func (g *gate) open(k clientaddr.Key) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.n >= g.total:
		return "busy"
	case k.Narrow != "" && g.counts[k.Narrow] >= g.perAddr:
		return "addr"
	case k.Wide != "" && g.counts[k.Wide] >= g.perWide:
		return "addr"
	}
	g.n++
	for _, s := range []string{k.Narrow, k.Wide} {
		if s != "" {
			g.counts[s]++
		}
	}
	return ""
}

func (g *gate) close(k clientaddr.Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	for _, s := range []string{k.Narrow, k.Wide} {
		if s == "" {
			continue
		}
		if g.counts[s] <= 1 {
			delete(g.counts, s)
		} else {
			g.counts[s]--
		}
	}
}

// retryAfterSeconds is the Retry-After a refused client is given.
const retryAfterSeconds = 10

// refuse answers a connection over a cap with an HTTP error and closes
// it. It reads (and drops) what the client sent first, for at most a
// second, so that closing does not reset the connection before the client
// reads the answer.
func (g *gate) refuse(c net.Conn, why string) {
	g.m.rejected.WithLabelValues("accept_" + why).Inc()
	select {
	case g.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-g.refusing }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		status, msg := "429 Too Many Requests", "rate-limited: too many connections from your address; close some or retry later\n"
		if why == "busy" {
			status, msg = "503 Service Unavailable", "error: this relay is at its connection limit; retry later\n"
		}
		fmt.Fprintf(c, "HTTP/1.1 %s\r\nRetry-After: %d\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			status, retryAfterSeconds, len(msg), msg)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}
