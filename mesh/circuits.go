package mesh

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	ma "github.com/multiformats/go-multiaddr"
)

// CircuitHooks let the node meter and grant the circuit relay v2 service
// per peer (spec/mesh-nat.md "Metering and grants"). Any field may be
// nil. relaying is true on the relay's side (this node relays for p: p is
// a circuit's source or destination, or asks for a reservation) and false
// on a client's (p relays for this node).
//
// Bytes are those of the streams that carry circuits and reservations
// (the hop and stop protocols): on the relay's side its service's streams,
// wrapped; on a client's side the bandwidth reporter's per-protocol
// counts with the relay. A circuit's time is its hop or stop stream's life
// on the relay's side and its relayed connection's life on a client's.
type CircuitHooks struct {
	// Bytes is told of n bytes moved on a circuit or reservation stream
	// with p.
	Bytes func(p peer.ID, relaying bool, n int)
	// Opened is told that a circuit with p opened and returns what to
	// call when it closes.
	Opened func(p peer.ID, relaying bool) (closed func())
	// AllowReserve is asked before the relay service grants or renews
	// p's reservation, AllowConnect before it opens a circuit from src to
	// dest; an error refuses (PERMISSION_DENIED: circuit relay v2 carries
	// no reason, so the error is logged and counted by the hook).
	AllowReserve func(p peer.ID) error
	AllowConnect func(src, dest peer.ID) error
}

func (c CircuitHooks) isZero() bool {
	return c.Bytes == nil && c.Opened == nil && c.AllowReserve == nil && c.AllowConnect == nil
}

// circuits meters the circuit relay service for one mesh.
type circuits struct {
	hooks CircuitHooks
	// serving counts this node's relay-side streams open with each peer
	// (peer.ID → *atomic.Int32): the bandwidth reporter leaves their
	// bytes to the wrapped streams, so a peer both relaying for this node
	// and relayed by it is not counted twice.
	serving sync.Map
	mu      sync.Mutex
	relayed map[network.Conn]func() // this node's open relayed connections
}

func newCircuits(h CircuitHooks) *circuits {
	return &circuits{hooks: h, relayed: map[network.Conn]func(){}}
}

func isCircuitProtocol(p protocol.ID) bool {
	return p == proto.ProtoIDv2Hop || p == proto.ProtoIDv2Stop
}

func (c *circuits) servingCount(p peer.ID) *atomic.Int32 {
	v, _ := c.serving.LoadOrStore(p, new(atomic.Int32))
	return v.(*atomic.Int32)
}

// clientBytes counts a client's side: bytes on a hop or stop stream with
// p while this node's relay service has none open with p.
func (c *circuits) clientBytes(n int64, pid protocol.ID, p peer.ID) {
	if n <= 0 || c.hooks.Bytes == nil || !isCircuitProtocol(pid) {
		return
	}
	if v, ok := c.serving.Load(p); ok && v.(*atomic.Int32).Load() > 0 {
		return
	}
	c.hooks.Bytes(p, false, int(n))
}

// reporter is the host's bandwidth reporter with the client side of
// circuits metered.
type reporter struct {
	*metrics.BandwidthCounter
	c *circuits
}

func (r reporter) LogSentMessageStream(n int64, pid protocol.ID, p peer.ID) {
	r.BandwidthCounter.LogSentMessageStream(n, pid, p)
	r.c.clientBytes(n, pid, p)
}

func (r reporter) LogRecvMessageStream(n int64, pid protocol.ID, p peer.ID) {
	r.BandwidthCounter.LogRecvMessageStream(n, pid, p)
	r.c.clientBytes(n, pid, p)
}

// Connected and Disconnected (network.Notifiee) time this node's relayed
// connections, the client's side of a circuit, against their relay.
func (c *circuits) Connected(_ network.Network, conn network.Conn) {
	if c.hooks.Opened == nil {
		return
	}
	relay, ok := relayOf(conn.RemoteMultiaddr())
	if !ok {
		return
	}
	closed := c.hooks.Opened(relay, false)
	c.mu.Lock()
	c.relayed[conn] = closed
	c.mu.Unlock()
}

func (c *circuits) Disconnected(_ network.Network, conn network.Conn) {
	c.mu.Lock()
	closed, ok := c.relayed[conn]
	delete(c.relayed, conn)
	c.mu.Unlock()
	if ok && closed != nil {
		closed()
	}
}

func (*circuits) Listen(network.Network, ma.Multiaddr)      {}
func (*circuits) ListenClose(network.Network, ma.Multiaddr) {}

// relayOf returns the relay of a relayed connection's remote address
// (…/p2p/<relay>/p2p-circuit…).
func relayOf(a ma.Multiaddr) (peer.ID, bool) {
	var relay peer.ID
	found := false
	ma.ForEach(a, func(c ma.Component) bool {
		switch c.Protocol().Code {
		case ma.P_P2P:
			relay = peer.ID(c.RawValue())
		case ma.P_CIRCUIT:
			found = relay != ""
			return false
		}
		return true
	})
	return relay, found
}

// relayHost is the host the relay service is built on: the streams it
// accepts (hop) and opens (stop) are wrapped to meter them.
type relayHost struct {
	host.Host
	c *circuits
}

func (h relayHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, func(s network.Stream) { handler(h.c.wrap(s)) })
}

func (h relayHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	return h.c.wrap(s), nil
}

// wrap meters one relay-side stream until it closes.
func (c *circuits) wrap(s network.Stream) network.Stream {
	p := s.Conn().RemotePeer()
	n := c.servingCount(p)
	n.Add(1)
	ms := &meteredStream{Stream: s, p: p, bytes: c.hooks.Bytes}
	var closed func()
	if c.hooks.Opened != nil {
		closed = c.hooks.Opened(p, true)
	}
	ms.done = func() {
		n.Add(-1)
		if closed != nil {
			closed()
		}
	}
	return ms
}

type meteredStream struct {
	network.Stream
	p     peer.ID
	bytes func(peer.ID, bool, int)
	once  sync.Once
	done  func()
}

func (s *meteredStream) Read(b []byte) (int, error) {
	n, err := s.Stream.Read(b)
	if n > 0 && s.bytes != nil {
		s.bytes(s.p, true, n)
	}
	return n, err
}

func (s *meteredStream) Write(b []byte) (int, error) {
	n, err := s.Stream.Write(b)
	if n > 0 && s.bytes != nil {
		s.bytes(s.p, true, n)
	}
	return n, err
}

func (s *meteredStream) Close() error {
	err := s.Stream.Close()
	s.once.Do(s.done)
	return err
}

func (s *meteredStream) Reset() error {
	err := s.Stream.Reset()
	s.once.Do(s.done)
	return err
}

// circuitACL is the relay service's relay.ACLFilter: the grant hooks.
type circuitACL struct {
	c   *circuits
	log func(msg string, args ...any)
}

func (a circuitACL) AllowReserve(p peer.ID, _ ma.Multiaddr) bool {
	if a.c.hooks.AllowReserve == nil {
		return true
	}
	if err := a.c.hooks.AllowReserve(p); err != nil {
		a.log("mesh: relay reservation refused", "peer", p, "reason", err)
		return false
	}
	return true
}

func (a circuitACL) AllowConnect(src peer.ID, _ ma.Multiaddr, dest peer.ID) bool {
	if a.c.hooks.AllowConnect == nil {
		return true
	}
	if err := a.c.hooks.AllowConnect(src, dest); err != nil {
		a.log("mesh: relay circuit refused", "src", src, "dest", dest, "reason", err)
		return false
	}
	return true
}
