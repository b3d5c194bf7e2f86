package agent

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/routing"
)

// Limits bound what unauthenticated senders may ask of the /didcomm
// endpoint (spec/limits.md), so that no one can fill a mediator's queue
// for someone else or take the endpoint from other senders. Addresses are
// keyed as package clientaddr says (IPv4 address, IPv6 /64).
type Limits struct {
	// AddrPerSecond and AddrBurst: POSTs from one address.
	AddrPerSecond float64
	AddrBurst     int
	// RecipientPerSecond and RecipientBurst: forwards to one recipient,
	// from everyone together (also over libp2p).
	RecipientPerSecond float64
	RecipientBurst     int
	// AddrRecipientPerSecond and AddrRecipientBurst: forwards from one
	// address to one recipient, so one sender gets only part of a
	// recipient's share.
	AddrRecipientPerSecond float64
	AddrRecipientBurst     int
	// MaxInFlight bounds POSTs being read and handled at once, and
	// MaxInFlightPerAddr those from one address.
	MaxInFlight        int
	MaxInFlightPerAddr int
	// BodyTimeout bounds how long reading one POST's body may take.
	BodyTimeout time.Duration
}

// DefaultLimits returns the default bounds.
func DefaultLimits() Limits {
	return Limits{
		AddrPerSecond:          20,
		AddrBurst:              60,
		RecipientPerSecond:     20,
		RecipientBurst:         100,
		AddrRecipientPerSecond: 2,
		AddrRecipientBurst:     20,
		MaxInFlight:            64,
		MaxInFlightPerAddr:     4,
		BodyTimeout:            10 * time.Second,
	}
}

// maxLimitKeys bounds each table of buckets.
const maxLimitKeys = 65536

// limiter applies Limits.
type limiter struct {
	cfg           Limits
	addrs         *clientaddr.Buckets
	recipients    *clientaddr.Buckets
	addrRecipient *clientaddr.Buckets
	inflight      chan struct{}

	mu     sync.Mutex
	byAddr map[string]int
}

func newLimiter(cfg Limits) *limiter {
	return &limiter{
		cfg:           cfg,
		addrs:         clientaddr.NewBuckets(cfg.AddrPerSecond, cfg.AddrBurst, maxLimitKeys),
		recipients:    clientaddr.NewBuckets(cfg.RecipientPerSecond, cfg.RecipientBurst, maxLimitKeys),
		addrRecipient: clientaddr.NewBuckets(cfg.AddrRecipientPerSecond, cfg.AddrRecipientBurst, maxLimitKeys),
		inflight:      make(chan struct{}, cfg.MaxInFlight),
		byAddr:        make(map[string]int),
	}
}

// admit takes an in-flight slot and a rate token for addr, or returns the
// HTTP status and problem to refuse with. release must be called when
// admitted.
func (l *limiter) admit(addr string) (release func(), status int, p *didcomm.Problem) {
	if ok, _ := l.addrs.Allow(addr); !ok {
		return nil, http.StatusTooManyRequests, &didcomm.Problem{Code: didcomm.CodeRateLimited,
			Err: fmt.Errorf("more than %g messages a second from your address; retry later", l.cfg.AddrPerSecond)}
	}
	l.mu.Lock()
	if l.byAddr[addr] >= l.cfg.MaxInFlightPerAddr {
		l.mu.Unlock()
		return nil, http.StatusTooManyRequests, &didcomm.Problem{Code: didcomm.CodeRateLimited,
			Err: fmt.Errorf("%d messages from your address are being handled; wait for their answers", l.cfg.MaxInFlightPerAddr)}
	}
	l.byAddr[addr]++
	l.mu.Unlock()
	select {
	case l.inflight <- struct{}{}:
	default:
		l.done(addr)
		return nil, http.StatusServiceUnavailable, &didcomm.Problem{Code: didcomm.CodeRateLimited,
			Err: fmt.Errorf("this endpoint is handling %d messages; retry later", l.cfg.MaxInFlight)}
	}
	return func() { <-l.inflight; l.done(addr) }, 0, nil
}

func (l *limiter) done(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[addr] <= 1 {
		delete(l.byAddr, addr)
	} else {
		l.byAddr[addr]--
	}
}

// forward checks a forward against the per-recipient buckets; addr is ""
// for a message that came over libp2p (its peer is bounded there).
func (l *limiter) forward(addr string, msg *didcomm.Message) error {
	next, _, err := routing.Unwrap(msg)
	if err != nil {
		return nil // the mediator refuses it with the reason
	}
	recipient, _, _ := strings.Cut(next, "#")
	if ok, _ := l.recipients.Allow(recipient); !ok {
		return &didcomm.Problem{Code: didcomm.CodeRateLimited, Err: fmt.Errorf("more than %g forwards a second to %s; retry later", l.cfg.RecipientPerSecond, recipient)}
	}
	if addr != "" {
		if ok, _ := l.addrRecipient.Allow(addr + " " + recipient); !ok {
			return &didcomm.Problem{Code: didcomm.CodeRateLimited, Err: fmt.Errorf("more than %g forwards a second from your address to %s; retry later", l.cfg.AddrRecipientPerSecond, recipient)}
		}
	}
	return nil
}

// senderAddrKey holds, in a request's context, the sender's address key.
type senderAddrKey struct{}

func withSenderAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, senderAddrKey{}, addr)
}

func senderAddr(ctx context.Context) string {
	s, _ := ctx.Value(senderAddrKey{}).(string)
	return s
}

// retryAfter is the Retry-After given with a rate-limited answer.
var retryAfter = strconv.Itoa(5)
