// Package netem is a userspace network-impairment proxy for tests: a TCP
// proxy between a client and a server that adds latency, loss, a
// bandwidth cap and silent blackholes, since this kernel has no tc netem
// (no sch_netem) and tests must run without privileges.
//
// It is for tests only (the leaf's wake tests put it between a leaf and
// its home node); it is not a production proxy.
//
// What it models, and how:
//
//   - Latency: every segment (a read of at most SegmentBytes) is delivered
//     Latency after it was sent, in each direction, so the round-trip time
//     is twice Latency.
//   - Loss: TCP retransmits what is lost, so an application above TCP sees
//     loss as a stall, not as missing bytes. A segment is "lost" with
//     probability Loss and then delivered one retransmission timeout (RTO,
//     at least 200 ms as Linux's minimum, plus the RTT) late; the segments
//     behind it wait too (head-of-line blocking), as on a real connection.
//   - Bandwidth: each direction is one link shared by every connection:
//     a segment occupies it for its size divided by Bandwidth.
//   - Blackhole: Blackhole makes every open connection silent forever
//     (bytes are dropped, no FIN, no RST: a NAT mapping lost while a phone
//     slept), and connections accepted while it lasts too; Restore ends it
//     for new connections only, as a real network path is restored for
//     new flows while the dead mapping stays dead.
//
// Counters (Stats) report bytes each way and connections accepted.
//
// Hand-written: Go has no userspace netem library; toxiproxy's Go package
// needs its server process and models loss as dropped bytes, not as the
// stall TCP turns loss into.
package netem

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// SegmentBytes is the most bytes one segment carries (a typical MSS).
const SegmentBytes = 1448

// minRTO is Linux's minimum retransmission timeout.
const minRTO = 200 * time.Millisecond

// Config is an impairment. The zero value passes traffic unchanged.
type Config struct {
	// Latency is the one-way delay (RTT = 2 x Latency).
	Latency time.Duration
	// Loss is the probability in [0, 1) that a segment is lost and
	// retransmitted one RTO later.
	Loss float64
	// Bandwidth caps each direction in bytes per second; 0 is unlimited.
	Bandwidth int64
}

// Stats are a proxy's counters.
type Stats struct {
	// Up is bytes from clients to the server, Down from the server.
	Up, Down int64
	// Conns is connections accepted.
	Conns int64
}

// Proxy forwards connections from its listener to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cfg     Config
	black   bool
	conns   map[*pair]struct{}
	closed  bool
	links   [2]link // up, down
	rng     *rand.Rand
	stats   [2]atomic.Int64
	nconns  atomic.Int64
	wg      sync.WaitGroup
	closing chan struct{}
}

// link is one direction's shared bottleneck.
type link struct {
	busyUntil time.Time
}

// pair is one proxied connection.
type pair struct {
	client, server net.Conn
	black          atomic.Bool
}

// New listens on 127.0.0.1 and forwards to target with cfg.
func New(target string, cfg Config) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return Serve(ln, target, cfg), nil
}

// Serve forwards connections accepted on ln to target with cfg until
// Close.
func Serve(ln net.Listener, target string, cfg Config) *Proxy {
	p := &Proxy{
		ln: ln, target: target, cfg: cfg,
		conns:   map[*pair]struct{}{},
		rng:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		closing: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetConfig changes the impairment for segments sent from now on.
func (p *Proxy) SetConfig(cfg Config) {
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
}

// Blackhole silences every open connection for good, and connections
// accepted until Restore.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.black = true
	for c := range p.conns {
		c.black.Store(true)
	}
}

// Restore lets new connections through again; blackholed ones stay
// silent.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.black = false
	p.mu.Unlock()
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Up: p.stats[0].Load(), Down: p.stats[1].Load(), Conns: p.nconns.Load()}
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	err := p.ln.Close()
	for c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.nconns.Add(1)
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close() // the target is down: refuse as it would
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		pr.black.Store(p.black)
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		var done sync.WaitGroup
		done.Add(2)
		p.wg.Add(3)
		go p.pipe(pr, c, s, 0, &done)
		go p.pipe(pr, s, c, 1, &done)
		go func() {
			defer p.wg.Done()
			done.Wait()
			p.mu.Lock()
			delete(p.conns, pr)
			p.mu.Unlock()
			c.Close()
			s.Close()
		}()
	}
}

// segment is bytes in flight and when they arrive.
type segment struct {
	b  []byte
	at time.Time
}

// schedule returns when a segment of n bytes sent now in direction dir
// arrives.
func (p *Proxy) schedule(dir, n int) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	l := &p.links[dir]
	start := now
	if l.busyUntil.After(start) {
		start = l.busyUntil
	}
	if p.cfg.Bandwidth > 0 {
		start = start.Add(time.Duration(int64(n) * int64(time.Second) / p.cfg.Bandwidth))
	}
	l.busyUntil = start
	at := start.Add(p.cfg.Latency)
	if p.cfg.Loss > 0 && p.rng.Float64() < p.cfg.Loss {
		at = at.Add(max(minRTO, 2*p.cfg.Latency) + 2*p.cfg.Latency)
	}
	return at
}

// pipe copies src to dst through the impairment. When src ends, dst's
// write side is closed after the segments in flight, unless the
// connection is blackholed (a dead path carries no FIN either).
func (p *Proxy) pipe(pr *pair, src, dst net.Conn, dir int, done *sync.WaitGroup) {
	defer p.wg.Done()
	defer done.Done()
	q := make(chan segment, 256)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		var last time.Time
		failed := false
		for s := range q {
			if failed {
				continue // drain, so the reader never blocks on a dead writer
			}
			// Segments arrive in order: one delayed by a loss holds back
			// those behind it.
			if s.at.Before(last) {
				s.at = last
			}
			last = s.at
			if d := time.Until(s.at); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-p.closing:
					t.Stop()
					return
				}
			}
			if pr.black.Load() {
				continue
			}
			// Counted before the write, so that a reader who has the bytes
			// never sees Stats without them; taken back if it fails.
			p.stats[dir].Add(int64(len(s.b)))
			if _, err := dst.Write(s.b); err != nil {
				p.stats[dir].Add(-int64(len(s.b)))
				failed = true
				src.Close()
				continue
			}
		}
	}()
	buf := make([]byte, SegmentBytes)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := append([]byte(nil), buf[:n]...)
			select {
			case q <- segment{b: b, at: p.schedule(dir, n)}:
			case <-p.closing:
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-writerDone
	if pr.black.Load() {
		<-p.closing // a blackholed flow never ends on its own
		return
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
}
