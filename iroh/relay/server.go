package relay

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"
)

// The HTTP paths iroh clients use on a relay.
const (
	// Path is where clients upgrade to the relay protocol (iroh's
	// RELAY_PATH); iroh clients replace their relay URL's path with it.
	Path = "/relay"
	// ProbePath answers iroh's HTTPS latency probe.
	ProbePath = "/ping"
	// NoContentPath answers iroh's captive-portal check.
	NoContentPath = "/generate_204"
)

// The WebSocket subprotocols, one per protocol version, best first.
const (
	ProtocolV2 = "iroh-relay-v2"
	ProtocolV1 = "iroh-relay-v1"
)

// pingInterval is how often the relay pings a client (iroh's 15 s); a
// client silent for readIdle is gone.
const (
	pingInterval     = 15 * time.Second
	readIdle         = 3 * pingInterval
	handshakeTimeout = 10 * time.Second
	writeTimeout     = 10 * time.Second
)

// Limits bounds what the relay gives its clients (spec/iroh.md, "Anchors
// as relays"). Zero fields take the defaults of DefaultLimits.
type Limits struct {
	// MaxClients is how many endpoints may be connected at once; one more
	// is refused in the handshake with a reason.
	MaxClients int
	// BytesPerSecond and BurstBytes bound the bytes each client may send
	// through the relay: reading from a client over its rate waits, so a
	// fast sender is slowed (TCP backpressure), not cut off.
	BytesPerSecond int
	BurstBytes     int
	// QueueFrames bounds the frames waiting to be written to one client;
	// datagrams beyond it are dropped, as UDP would.
	QueueFrames int
}

// DefaultLimits are the [iroh] relay_* defaults.
func DefaultLimits() Limits {
	return Limits{MaxClients: 1024, BytesPerSecond: 2 << 20, BurstBytes: 4 << 20, QueueFrames: 512}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxClients <= 0 {
		l.MaxClients = d.MaxClients
	}
	if l.BytesPerSecond <= 0 {
		l.BytesPerSecond = d.BytesPerSecond
	}
	if l.BurstBytes <= 0 {
		l.BurstBytes = d.BurstBytes
	}
	if l.BurstBytes < MaxPacketSize+64 {
		// One frame must always fit the bucket.
		l.BurstBytes = MaxPacketSize + 64
	}
	if l.QueueFrames <= 0 {
		l.QueueFrames = d.QueueFrames
	}
	return l
}

// Stats are the relay's counters since it started.
type Stats struct {
	Clients        int    // connected endpoints (active connections)
	Accepted       uint64 // handshakes that succeeded
	Refused        uint64 // handshakes refused: bad signature or full
	DatagramFrames uint64 // datagram frames forwarded
	DatagramBytes  uint64 // their content bytes
	Dropped        uint64 // datagram frames dropped: no such client or its queue full
}

// Server is an iroh relay: it authenticates endpoints by their keys and
// forwards datagrams between them. It is an http.Handler for Path,
// ProbePath and NoContentPath.
type Server struct {
	limits Limits
	log    *slog.Logger
	up     websocket.Upgrader

	mu       sync.Mutex
	clients  map[[KeyLen]byte]*clientState
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	accepted atomic.Uint64
	refused  atomic.Uint64
	frames   atomic.Uint64
	bytes    atomic.Uint64
	dropped  atomic.Uint64
}

// clientState is one endpoint's connections: the active one gets its
// datagrams; older ones (same key, connected earlier) wait as iroh's do.
type clientState struct {
	active   *client
	inactive []*client
	// sentTo are the endpoints the active client sent to, told when it goes.
	sentTo map[[KeyLen]byte]struct{}
}

type client struct {
	key  [KeyLen]byte
	v2   bool
	out  chan []byte
	done chan struct{}
	once sync.Once
}

func (c *client) stop() { c.once.Do(func() { close(c.done) }) }

// trySend queues a frame for c, or reports that its queue is full.
func (c *client) trySend(f []byte) bool {
	select {
	case c.out <- f:
		return true
	case <-c.done:
		return false
	default:
		return false
	}
}

// New returns a relay with limits l (zero fields: defaults).
func New(l Limits, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{limits: l.withDefaults(), log: log, clients: make(map[[KeyLen]byte]*clientState), ctx: ctx, cancel: cancel}
	s.up = websocket.Upgrader{
		HandshakeTimeout: handshakeTimeout,
		Subprotocols:     []string{ProtocolV2, ProtocolV1},
		// iroh clients in browsers connect from any origin.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	return s
}

// Limits are the limits in force.
func (s *Server) Limits() Limits { return s.limits }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := len(s.clients)
	s.mu.Unlock()
	return Stats{Clients: n, Accepted: s.accepted.Load(), Refused: s.refused.Load(),
		DatagramFrames: s.frames.Load(), DatagramBytes: s.bytes.Load(), Dropped: s.dropped.Load()}
}

// Close disconnects every client and waits for their goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// Mount registers the relay's paths on mux.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.Handle(Path, s)
	mux.Handle(ProbePath, s)
	mux.Handle(NoContentPath, s)
}

// ServeHTTP serves Path (the relay protocol over a WebSocket upgrade),
// ProbePath and NoContentPath.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case ProbePath:
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.WriteHeader(http.StatusOK)
	case NoContentPath:
		if c := r.Header.Get("X-Iroh-Challenge"); validChallenge(c) {
			w.Header().Set("X-Iroh-Response", "response "+c)
		}
		w.WriteHeader(http.StatusNoContent)
	case Path:
		s.serveRelay(w, r)
	default:
		http.NotFound(w, r)
	}
}

// validChallenge is iroh's rule for a captive-portal challenge it echoes.
func validChallenge(c string) bool {
	if c == "" || len(c) >= 64 {
		return false
	}
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func (s *Server) serveRelay(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "error: "+Path+" is iroh's relay protocol: upgrade to a WebSocket with subprotocol "+ProtocolV2+" or "+ProtocolV1, http.StatusUpgradeRequired)
		return
	}
	offered := websocket.Subprotocols(r)
	v2, ok := false, false
	for _, p := range offered {
		v2 = v2 || p == ProtocolV2
		ok = ok || p == ProtocolV2 || p == ProtocolV1
	}
	if !ok {
		http.Error(w, fmt.Sprintf("error: unsupported relay version: this relay speaks %s, %s; the client offered %q", ProtocolV2, ProtocolV1, strings.Join(offered, ", ")), http.StatusBadRequest)
		return
	}
	conn, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer conn.Close()
	conn.SetReadLimit(MaxPacketSize + 64)
	key, err := s.handshake(conn, r)
	if err != nil {
		if !errors.Is(err, ErrAuth) {
			s.refused.Add(1)
		}
		s.log.Debug("iroh relay: handshake failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	c := &client{key: key, v2: v2, out: make(chan []byte, s.limits.QueueFrames), done: make(chan struct{})}
	// Registered before the confirmation, so a peer told of this client
	// can reach it at once.
	if !s.register(c) {
		s.refused.Add(1)
		s.log.Debug("iroh relay: full", "remote", r.RemoteAddr)
		reason := fmt.Sprintf("relay full: %d endpoints connected (relay_max_clients)", s.limits.MaxClients)
		conn.WriteMessage(websocket.BinaryMessage, AppendServerDeniesAuth(nil, reason))
		return
	}
	defer s.unregister(c)
	if err := conn.WriteMessage(websocket.BinaryMessage, AppendServerConfirmsAuth(nil)); err != nil {
		return
	}
	conn.SetWriteDeadline(time.Time{})
	s.accepted.Add(1)
	go func() {
		select {
		case <-c.done:
		case <-s.ctx.Done():
		}
		c.stop()
		conn.SetReadDeadline(time.Now())
	}()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writeLoop(conn, c)
	}()
	s.readLoop(conn, c)
	c.stop()
	<-writerDone
}

// handshake authenticates the client: by its header signature over TLS
// keying material if it sent one that verifies, else by a signed
// challenge.
func (s *Server) handshake(conn *websocket.Conn, r *http.Request) ([KeyLen]byte, error) {
	conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	conn.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	var key [KeyLen]byte
	authed := false
	if h := r.Header.Get(ClientAuthHeader); h != "" && r.TLS != nil {
		if a, err := DecodeKeyMaterialAuth(h); err == nil && a.Verify(r.TLS) == nil {
			key, authed = a.Key, true
		}
	}
	if !authed {
		var c [16]byte
		rand.Read(c[:])
		if err := conn.WriteMessage(websocket.BinaryMessage, AppendServerChallenge(nil, c)); err != nil {
			return key, err
		}
		mt, msg, err := conn.ReadMessage()
		if err != nil {
			return key, err
		}
		if mt != websocket.BinaryMessage {
			return key, fmt.Errorf("%w: a text message during the handshake", ErrEncoding)
		}
		a, err := DecodeClientAuth(msg)
		if err != nil {
			return key, err
		}
		if err := a.Verify(c); err != nil {
			s.refused.Add(1) // before the client can see the denial
			conn.WriteMessage(websocket.BinaryMessage, AppendServerDeniesAuth(nil, "signature invalid"))
			return key, err
		}
		key = a.Key
	}
	return key, nil
}

// register makes c its endpoint's active connection, unless the relay is
// full: a reconnect of a connected endpoint always fits.
func (s *Server) register(c *client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.clients[c.key]
	if st == nil {
		if len(s.clients) >= s.limits.MaxClients {
			return false
		}
		s.clients[c.key] = &clientState{active: c, sentTo: make(map[[KeyLen]byte]struct{})}
		return true
	}
	old := st.active
	st.active = c
	st.inactive = append(st.inactive, old)
	old.trySend(statusFrame(old, StatusSameEndpointIDConnected))
	return true
}

func statusFrame(c *client, status byte) []byte {
	if c.v2 {
		return AppendStatus(nil, status)
	}
	if status == StatusHealthy {
		return AppendHealth(nil, "")
	}
	return AppendHealth(nil, "Another endpoint connected with the same endpoint id. No more messages will be received")
}

func (s *Server) unregister(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.clients[c.key]
	if st == nil {
		return
	}
	if st.active != c {
		for i, o := range st.inactive {
			if o == c {
				st.inactive = append(st.inactive[:i], st.inactive[i+1:]...)
				break
			}
		}
		return
	}
	if n := len(st.inactive); n > 0 {
		st.active = st.inactive[n-1]
		st.inactive = st.inactive[:n-1]
		st.active.trySend(statusFrame(st.active, StatusHealthy))
		return
	}
	delete(s.clients, c.key)
	for peer := range st.sentTo {
		if p := s.clients[peer]; p != nil {
			p.active.trySend(AppendEndpointGone(nil, c.key))
		}
	}
}

func (s *Server) readLoop(conn *websocket.Conn, c *client) {
	lim := rate.NewLimiter(rate.Limit(s.limits.BytesPerSecond), s.limits.BurstBytes)
	for {
		conn.SetReadDeadline(time.Now().Add(readIdle))
		mt, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if mt != websocket.BinaryMessage {
			return
		}
		if err := lim.WaitN(s.ctx, len(msg)); err != nil {
			return
		}
		f, err := DecodeClientFrame(msg)
		if err != nil {
			s.log.Debug("iroh relay: bad frame, closing", "err", err)
			return
		}
		switch f.Type {
		case FramePing:
			if !c.trySend(AppendPing(nil, FramePong, f.Data)) {
				return
			}
		case FramePong:
		case FrameClientToRelayDatagram, FrameClientToRelayBatch:
			s.forward(c, f)
		}
	}
}

// forward hands a datagram frame to its destination's active connection,
// or drops it (no such endpoint, or its queue full), as UDP would.
func (s *Server) forward(from *client, f ClientFrame) {
	frame := AppendRelayDatagram(make([]byte, 0, 1+KeyLen+3+len(f.Contents)), from.key, f.ECN, f.SegmentSize, f.Contents)
	s.mu.Lock()
	dst := s.clients[f.Dst]
	var to *client
	if dst != nil {
		to = dst.active
		if st := s.clients[from.key]; st != nil && st.active == from {
			st.sentTo[f.Dst] = struct{}{}
		}
	}
	s.mu.Unlock()
	if to == nil {
		s.dropped.Add(1)
		return
	}
	// Counted before the hand-off, so that a receiver that has read the
	// frame never sees Stats without it; taken back if the queue is full.
	n := uint64(len(f.Contents))
	s.frames.Add(1)
	s.bytes.Add(n)
	if !to.trySend(frame) {
		s.frames.Add(^uint64(0))
		s.bytes.Add(-n)
		s.dropped.Add(1)
	}
}

func (s *Server) writeLoop(conn *websocket.Conn, c *client) {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	defer conn.Close() // unblocks the reader
	for {
		var f []byte
		select {
		case f = <-c.out:
		case <-t.C:
			var d [8]byte
			rand.Read(d[:])
			f = AppendPing(nil, FramePing, d)
		case <-c.done:
			return
		}
		conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := conn.WriteMessage(websocket.BinaryMessage, f); err != nil {
			return
		}
	}
}
