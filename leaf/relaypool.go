package leaf

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
)

// relayPool holds a wake's relay connections, at most one live per home:
// the outbox goes to every home over its own, the catch-up uses whichever
// is live or connects first, and a connection that failed is dropped so
// the next use dials anew. Every connection it made is closed by
// closeAll.
type relayPool struct {
	w *wake
	// ctx bounds the pool's dials: closeAll cancels one still running.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	live   []*relayConn // by home index
	calls  []*dialCall  // the dial running for each home, if any
	all    []*relayConn
	closed bool
}

// dialCall is one dial to a home that concurrent users wait on.
type dialCall struct {
	done chan struct{}
	rc   *relayConn
	err  error
}

func newRelayPool(w *wake) *relayPool {
	n := len(w.st.Homes)
	ctx, cancel := context.WithCancel(w.ctx)
	return &relayPool{w: w, ctx: ctx, cancel: cancel, live: make([]*relayConn, n), calls: make([]*dialCall, n)}
}

var (
	// errUnreachable: every dial to a home failed for unreachableAfter.
	errUnreachable = errors.New("unreachable")
	errPoolClosed  = errors.New("the wake's relay connections are closed")
)

// get returns a live connection to home i, dialing one if there is none
// (one dial at a time per home).
func (p *relayPool) get(i int) (*relayConn, error) {
	p.mu.Lock()
	if rc := p.live[i]; rc != nil && rc.alive() {
		p.mu.Unlock()
		return rc, nil
	}
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	if p.w.unreachable(i) {
		p.mu.Unlock()
		return nil, permanent(fmt.Errorf("relay of %s: %w", p.w.st.Homes[i].DID, errUnreachable))
	}
	c := p.calls[i]
	if c == nil {
		c = &dialCall{done: make(chan struct{})}
		p.calls[i] = c
		p.w.bg.Add(1)
		go func() {
			defer p.w.bg.Done()
			rc, err := p.w.dialRelay(p.ctx, i)
			p.mu.Lock()
			p.calls[i] = nil
			if rc != nil && p.closed {
				p.mu.Unlock()
				rc.close()
				rc, err = nil, errPoolClosed
				p.mu.Lock()
			}
			if rc != nil {
				p.live[i] = rc
				p.all = append(p.all, rc)
			}
			c.rc, c.err = rc, err
			p.mu.Unlock()
			close(c.done)
		}()
	}
	p.mu.Unlock()
	select {
	case <-c.done:
		return c.rc, c.err
	case <-p.ctx.Done():
		return nil, cmp.Or(p.w.ctx.Err(), errPoolClosed)
	}
}

// any returns a live connection to some home: one already open, else the
// first of every reachable home's dialled at once (the others stay in
// the pool for the outbox).
func (p *relayPool) any() (*relayConn, error) {
	p.mu.Lock()
	for _, rc := range p.live {
		if rc != nil && rc.alive() {
			p.mu.Unlock()
			return rc, nil
		}
	}
	p.mu.Unlock()
	type result struct {
		rc  *relayConn
		err error
	}
	results := make(chan result, len(p.live))
	n := 0
	for i := range p.live {
		if p.w.unreachable(i) {
			continue
		}
		n++
		p.w.bg.Add(1)
		go func() {
			defer p.w.bg.Done()
			rc, err := p.get(i)
			results <- result{rc, err}
		}()
	}
	if n == 0 {
		return nil, permanent(fmt.Errorf("every home relay: %w", errUnreachable))
	}
	var errs []error
	for range n {
		r := <-results
		if r.err == nil {
			return r.rc, nil
		}
		errs = append(errs, r.err)
	}
	return nil, errors.Join(errs...)
}

// drop closes a connection that failed, so the next use dials anew.
func (p *relayPool) drop(rc *relayConn) {
	p.mu.Lock()
	for i, c := range p.live {
		if c == rc {
			p.live[i] = nil
		}
	}
	p.mu.Unlock()
	rc.close()
}

// closeAll closes every connection the pool made, and any that a dial
// still running makes.
func (p *relayPool) closeAll() {
	p.cancel()
	p.mu.Lock()
	p.closed = true
	all := p.all
	p.all, p.live = nil, make([]*relayConn, len(p.live))
	p.mu.Unlock()
	for _, rc := range all {
		rc.close()
	}
}
