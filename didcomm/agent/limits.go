package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/problemreport"
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

// Why admit refused a POST.
type refusalKind int

const (
	refuseAddrRate     refusalKind = iota // the address's POST bucket is empty
	refuseAddrInFlight                    // the address has MaxInFlightPerAddr being handled
	refuseBusy                            // the endpoint has MaxInFlight being handled
	refusalKinds
)

// admit takes an in-flight slot and a rate token for addr, or says why
// not and, for the address's own bucket, how long until its next token.
// release must be called when admitted.
func (l *limiter) admit(addr string) (release func(), refused refusalKind, wait time.Duration) {
	if ok, wait := l.addrs.Allow(addr); !ok {
		return nil, refuseAddrRate, wait
	}
	l.mu.Lock()
	if l.byAddr[addr] >= l.cfg.MaxInFlightPerAddr {
		l.mu.Unlock()
		return nil, refuseAddrInFlight, maxTarpit
	}
	l.byAddr[addr]++
	l.mu.Unlock()
	select {
	case l.inflight <- struct{}{}:
	default:
		l.done(addr)
		return nil, refuseBusy, 0
	}
	return func() { <-l.inflight; l.done(addr) }, 0, 0
}

// problem is the problem a refusal of kind k reports.
func (l *limiter) problem(k refusalKind) (int, *didcomm.Problem) {
	switch k {
	case refuseAddrRate:
		return http.StatusTooManyRequests, &didcomm.Problem{Code: didcomm.CodeRateLimited,
			Err: fmt.Errorf("more than %g messages a second from your address; retry later", l.cfg.AddrPerSecond)}
	case refuseAddrInFlight:
		return http.StatusTooManyRequests, &didcomm.Problem{Code: didcomm.CodeRateLimited,
			Err: fmt.Errorf("%d messages from your address are being handled; wait for their answers", l.cfg.MaxInFlightPerAddr)}
	}
	return http.StatusServiceUnavailable, &didcomm.Problem{Code: didcomm.CodeRateLimited,
		Err: fmt.Errorf("this endpoint is handling %d messages; retry later", l.cfg.MaxInFlight)}
}

// maxTarpit is the longest an address over its own bounds waits for its
// refusal. A flood on kept-alive connections then gets about one answer
// a second per connection (and the accept gate bounds its connections)
// instead of as many as it can send.
const maxTarpit = time.Second

// refusal is a refusal the endpoint repeats, its problem report packed
// once: a flood of refused POSTs costs no packing each.
type refusal struct {
	status int
	report []byte // a plaintext problem report
	idAt   int    // where its id's hex digits start
}

// placeholderID is the id a refusal's report is packed with; each answer
// gets a fresh id written over it.
var placeholderID = strings.Repeat("0", 32)

// newRefusals packs the report of every refusal kind of l, from did.
func newRefusals(l *limiter, did string, packer *didcomm.Packer) ([refusalKinds]refusal, error) {
	var out [refusalKinds]refusal
	for k := range refusalKinds {
		status, p := l.problem(k)
		m, err := problemreport.New(p, did, "", "")
		if err != nil {
			return out, err
		}
		m.ID = placeholderID
		b, err := packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModePlaintext})
		if err != nil {
			return out, err
		}
		at := bytes.Index(b, []byte(`"id":"`+placeholderID+`"`))
		if at < 0 {
			return out, fmt.Errorf("agent: packed report has no id field")
		}
		out[k] = refusal{status: status, report: b, idAt: at + len(`"id":"`)}
	}
	return out, nil
}

// write answers with the refusal, a fresh id in its report, and closes
// the connection after it: a sender over its bounds reconnects to ask
// again.
func (r *refusal) write(w http.ResponseWriter) {
	out := bytes.Clone(r.report)
	copy(out[r.idAt:], didcomm.NewID())
	h := w.Header()
	h.Set("Retry-After", retryAfter)
	h.Set("Content-Type", didcomm.MediaTypePlain)
	h.Set("Connection", "close")
	w.WriteHeader(r.status)
	_, _ = w.Write(out)
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
