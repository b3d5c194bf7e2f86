package relay

import (
	"errors"
	"net"
	"sync"

	"fleetmesh.org/fleetmesh/clientaddr"
)

// Listener wraps ln so that the relay's connections are counted and can
// be corked. Counted: a connection over the per-address or the global cap
// is refused at accept with HTTP 429 or 503 and Retry-After (see gate).
// Corked: a connection's writer hands the kernel a burst of queued
// replies in one write instead of one write per message. Serve the relay
// from the listener it returns; connections accepted any other way still
// work, uncounted and written message by message. Other HTTP handlers
// served from the same listener are counted too, and their writes pass
// straight through.
func (r *Relay) Listener(ln net.Listener) net.Listener {
	return corkListener{Listener: ln, bufs: &r.corkBufs, gate: r.gate, proxies: r.cfg.TrustedProxies}
}

// corkListener admits connections through the gate and wraps each in a
// corkConn.
type corkListener struct {
	net.Listener
	bufs    *sync.Pool // of *[]byte, shared by the relay's connections
	gate    *gate
	proxies clientaddr.Proxies
}

func (l corkListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		k := clientaddr.Of(c.RemoteAddr().String())
		if l.proxies.Trusted(c.RemoteAddr().String()) {
			// Many clients share a proxy's address: only the total holds
			// here; the upgrade keys each by the client it forwards for.
			k = clientaddr.Key{}
		}
		if why := l.gate.open(k); why != "" {
			l.gate.refuse(c, why)
			continue
		}
		return &corkConn{Conn: c, bufs: l.bufs, release: func() { l.gate.close(k) }}, nil
	}
}

// maxPooledCork is the largest cork buffer kept for reuse: one batch with a
// large last message fits, and a buffer grown by an outsized event is
// dropped rather than pinned in the pool.
const maxPooledCork = 2 * batchBytes

// corkConn is a net.Conn whose writes between cork and uncork collect in a
// buffer that uncork hands to the connection in one Write. Gorilla writes
// every WebSocket frame with its own Write, so this is the only place a
// burst of frames can be joined into one syscall. Outside cork and uncork,
// writes pass straight through.
//
// The mutex makes Write safe from several goroutines, as gorilla needs:
// besides the conn writer, its default ping and close handlers write from
// the read loop. A frame written while corked is sent, in order, at uncork.
type corkConn struct {
	net.Conn
	bufs *sync.Pool
	// release gives the connection's gate slot back, once.
	release   func()
	closeOnce sync.Once

	mu     sync.Mutex
	corked bool
	// buf is taken from bufs by the first corked Write and returned at
	// uncork, so an idle connection holds no buffer.
	buf *[]byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = c.bufs.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

// cork makes writes collect until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was collected since cork in one Write, under the
// write deadline last set, and lets writes pass through again.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if c.buf == nil {
		return nil
	}
	_, err := c.Conn.Write(*c.buf)
	if cap(*c.buf) <= maxPooledCork {
		*c.buf = (*c.buf)[:0]
		c.bufs.Put(c.buf)
	}
	c.buf = nil
	return err
}

// Close closes the connection and gives its slot in the gate back.
func (c *corkConn) Close() error {
	if c.release != nil {
		c.closeOnce.Do(c.release)
	}
	return c.Conn.Close()
}

// CloseWrite half-closes the connection below when it can. net/http does
// this before closing a connection it has answered, so that the client
// reads the whole response rather than a reset; the wrapper must not hide
// the TCP connection's CloseWrite from it.
func (c *corkConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
