package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/iroh"
	"fleetmesh.org/fleetmesh/meshsync"
)

// IrohDir holds the iroh helper's socket in a node home.
const IrohDir = "iroh"

// irohReadyWait bounds how long Serve waits for the iroh helper's first
// bind before it reports the node ready without an iroh line.
const irohReadyWait = 20 * time.Second

// irohPart is the node's iroh side (spec/iroh.md): the supervised endpoint,
// the protocols it serves, and the dialler that picks a transport per peer.
type irohPart struct {
	ep    *iroh.Endpoint
	mp    *meshPart
	peers map[peer.ID]iroh.Addr // from [iroh] peers
	log   *slog.Logger
	ready chan struct{} // closed at the helper's first bind
	// maxLearned bounds the relays taken from anchors' descriptors.
	maxLearned int

	mu sync.Mutex
	// byTransport counts the streams the node opened, per transport.
	byTransport map[string]uint64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openIroh starts the iroh endpoint, or returns nil and logs why iroh is
// off: the node runs on libp2p alone then.
func openIroh(opts Options, mp *meshPart, dc *agent.Service) *irohPart {
	ic := opts.Config.Iroh
	if !ic.Enabled {
		opts.Log.Info("iroh off: [iroh] enabled = false")
		return nil
	}
	cfgPeers, _ := ic.ParsePeers() // validated with the config
	ip := &irohPart{
		mp: mp, log: opts.Log, ready: make(chan struct{}), maxLearned: ic.MaxLearnedRelays,
		peers:       make(map[peer.ID]iroh.Addr),
		byTransport: make(map[string]uint64),
	}
	for _, p := range cfgPeers {
		id, err := iroh.PeerID(p.ID)
		if err == nil {
			ip.peers[id] = iroh.Addr{ID: p.ID, Addrs: p.Addrs}
		}
	}
	var once sync.Once
	ep, err := iroh.Start(iroh.Config{
		Key:       opts.Key,
		HelperDir: helperDir(ic),
		Node:      ic.Node,
		SocketDir: opts.Home.Path(IrohDir),
		Relays:    ic.Relays,
		Bind:      ic.Bind,
		Handlers: map[string]iroh.Handler{
			meshsync.ProtocolID:          ip.serveSync,
			string(transport.ProtocolID): func(s *iroh.Stream) { serveDIDComm(dc, s) },
		},
		OnReady: func(iroh.Info) {
			once.Do(func() { close(ip.ready) })
			// The descriptor lists iroh addresses: sign it again.
			mp.self.resign()
		},
		Log: opts.Log,
	})
	if err != nil {
		opts.Log.Warn("iroh off: the node runs on libp2p alone", "why", err.Error())
		return nil
	}
	ip.ep = ep
	mp.self.irohAddr = ip.descriptorAddr
	mp.rounds.SetExtraPeers(ip.irohOnlyPeers)
	mp.sync.SetDialer(ip.dialSync)
	return ip
}

// helperDir is [iroh] helper_dir, or iroh/helper beside the executable.
func helperDir(ic config.IrohConfig) string {
	if ic.HelperDir != "" {
		return ic.HelperDir
	}
	exe, err := os.Executable()
	if err != nil {
		return "iroh/helper"
	}
	return filepath.Join(filepath.Dir(exe), "iroh", "helper")
}

func (ip *irohPart) serveSync(s *iroh.Stream) {
	p, err := s.RemotePeer()
	if err != nil {
		s.Close()
		return
	}
	ip.mp.sync.ServeStream(s, p)
}

// serveDIDComm answers one DIDComm message on an iroh stream: the same
// framing as the libp2p binding (one length-prefixed frame each way).
func serveDIDComm(dc *agent.Service, s *iroh.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(transport.StreamTimeout))
	in, err := transport.ReadFrame(bufio.NewReader(s), transport.MaxFrameBytes)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), transport.StreamTimeout)
	defer cancel()
	out, err := dc.Handle(ctx, in)
	if err != nil && out == nil {
		return
	}
	_ = transport.WriteFrame(s, out)
}

// start runs anti-entropy with the peers reached over iroh only: those
// libp2p has no connection to, which the mesh's own round never picks.
func (ip *irohPart) start() {
	ctx, cancel := context.WithCancel(context.Background())
	ip.cancel = cancel
	ip.learnRelays(ctx, ip.ep.Relays(), ip.maxLearned)
	ip.wg.Go(func() { ip.mp.rounds.RunRounds(ctx, "iroh", ip.irohOnlyPeers) })
}

func (ip *irohPart) close() {
	if ip.cancel != nil {
		ip.cancel()
	}
	ip.wg.Wait()
	ip.ep.Close()
}

// irohOnlyPeers are the peers with an iroh address and no libp2p
// connection.
func (ip *irohPart) irohOnlyPeers() []peer.ID {
	var out []peer.ID
	for p := range ip.peers {
		if ip.mp.m.Host().Network().Connectedness(p) != network.Connected {
			out = append(out, p)
		}
	}
	for _, c := range ip.ep.Conns() {
		p, err := iroh.PeerID(c.Remote)
		if err == nil && !slices.Contains(out, p) && ip.mp.m.Host().Network().Connectedness(p) != network.Connected {
			out = append(out, p)
		}
	}
	return out
}

// addrOf is how iroh reaches p: its descriptor's iroh address if the mesh
// holds one, else [iroh] peers, else the bare id when an iroh connection
// to it is open (the helper reuses it).
func (ip *irohPart) addrOf(p peer.ID) (iroh.Addr, bool) {
	if raw, ok := ip.mp.m.Descriptor(p); ok {
		if s, err := descriptor.Verify(raw, time.Now(), descriptor.DefaultLimits()); err == nil && s.Descriptor.Addresses.Iroh != nil {
			a := s.Descriptor.Addresses.Iroh
			return iroh.Addr{ID: a.EndpointID, Relay: a.RelayURL, Addrs: a.Direct}, true
		}
	}
	if a, ok := ip.peers[p]; ok {
		return a, true
	}
	id, err := iroh.EndpointID(p)
	if err != nil {
		return iroh.Addr{}, false
	}
	if open, _ := ip.ep.Connected(id); open {
		return iroh.Addr{ID: id}, true
	}
	return iroh.Addr{}, false
}

// useIroh says whether a stream to p should go over iroh: libp2p has no
// direct connection to it, and iroh has an address for it. A libp2p
// connection only through a circuit relay loses to iroh, whose own
// connection may be direct.
func (ip *irohPart) useIroh(p peer.ID) (iroh.Addr, bool) {
	if _, up := ip.ep.Info(); !up {
		return iroh.Addr{}, false
	}
	a, ok := ip.addrOf(p)
	if !ok {
		return a, false
	}
	for _, c := range ip.mp.m.Host().Network().ConnsToPeer(p) {
		if !c.Stat().Limited {
			return a, false // a direct libp2p connection
		}
	}
	return a, true
}

func (ip *irohPart) count(transport string) {
	ip.mu.Lock()
	ip.byTransport[transport]++
	ip.mu.Unlock()
}

// dialSync is the sync service's dialler: iroh when useIroh says so (with
// libp2p as the fallback), libp2p otherwise.
func (ip *irohPart) dialSync(ctx context.Context, p peer.ID) (meshsync.Stream, error) {
	if a, ok := ip.useIroh(p); ok {
		s, err := ip.ep.Dial(ctx, a, meshsync.ProtocolID)
		if err == nil {
			ip.count("iroh")
			return s, nil
		}
		ip.log.Debug("iroh: sync dial failed; trying libp2p", "peer", p, "err", err)
	}
	s, err := ip.mp.sync.Libp2pStream(ctx, p)
	if err == nil {
		ip.count("libp2p")
	}
	return s, err
}

// descriptorAddr is the iroh address the descriptor lists, nil until the
// helper serves. Unspecified addresses are left out: a peer cannot dial
// them.
func (ip *irohPart) descriptorAddr() *descriptor.IrohAddr {
	info, up := ip.ep.Info()
	if !up {
		return nil
	}
	a := &descriptor.IrohAddr{EndpointID: info.ID, RelayURL: info.Relay}
	for _, s := range info.Addrs {
		h, err := hostIP(s)
		if err != nil || h.IsUnspecified() {
			continue
		}
		a.Direct = append(a.Direct, s)
	}
	return a
}

func hostIP(s string) (net.IP, error) {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("not an IP: %s", host)
	}
	return ip, nil
}

// ErrNoIroh is returned by SendDIDComm when the node runs without iroh
// or knows no iroh address for the peer.
var ErrNoIroh = errors.New("node: no iroh route to the peer")

// SendDIDComm sends one packed DIDComm message to p and returns its
// answer: over iroh when useIroh says so, over libp2p otherwise.
func (n *Node) SendDIDComm(ctx context.Context, p peer.ID, packed []byte) ([]byte, error) {
	ip := n.iroh
	if ip == nil {
		return transport.SendLibp2p(ctx, n.mesh.m.Host(), p, packed)
	}
	a, ok := ip.useIroh(p)
	if !ok {
		ip.count("libp2p")
		return transport.SendLibp2p(ctx, n.mesh.m.Host(), p, packed)
	}
	s, err := ip.ep.Dial(ctx, a, string(transport.ProtocolID))
	if err != nil {
		return nil, err
	}
	ip.count("iroh")
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := transport.WriteFrame(s, packed); err != nil {
		return nil, fmt.Errorf("node: didcomm over iroh: %w", err)
	}
	if err := s.CloseWrite(); err != nil {
		return nil, fmt.Errorf("node: didcomm over iroh: %w", err)
	}
	out, err := transport.ReadFrame(bufio.NewReader(s), transport.MaxFrameBytes)
	if err != nil {
		return nil, fmt.Errorf("node: didcomm answer over iroh: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Iroh is where the node's iroh endpoint serves, ok false while it does
// not (off, or its helper not up).
func (n *Node) Iroh() (info iroh.Info, ok bool) {
	if n.iroh == nil {
		return info, false
	}
	return n.iroh.ep.Info()
}

// IrohEndpoint is the node's iroh endpoint, nil when iroh is off.
func (n *Node) IrohEndpoint() *iroh.Endpoint {
	if n.iroh == nil {
		return nil
	}
	return n.iroh.ep
}

// waitIroh waits, boundedly, for the helper's first bind, so that Ready
// can report the iroh addresses.
func (ip *irohPart) waitIroh() {
	select {
	case <-ip.ready:
	case <-time.After(irohReadyWait):
		ip.log.Warn("iroh: the helper has not bound yet; the node serves on libp2p meanwhile")
	}
}

// irohCollector exports the iroh endpoint's state to /metrics.
type irohCollector struct {
	ip                                  *irohPart
	up, conns, restarts, streams, dials *prometheus.Desc
}

func newIrohCollector(ip *irohPart) *irohCollector {
	return &irohCollector{
		ip:       ip,
		up:       prometheus.NewDesc("fleetmesh_iroh_up", "1 while the iroh helper serves.", nil, nil),
		conns:    prometheus.NewDesc("fleetmesh_iroh_connections", "Open iroh connections by selected path (direct, relay, none).", []string{"path"}, nil),
		restarts: prometheus.NewDesc("fleetmesh_iroh_helper_restarts_total", "Times the iroh helper stopped and was started again.", nil, nil),
		streams:  prometheus.NewDesc("fleetmesh_iroh_streams_total", "iroh streams by direction.", []string{"direction"}, nil),
		dials:    prometheus.NewDesc("fleetmesh_transport_streams_total", "Sync and DIDComm streams this node opened, by the transport it chose.", []string{"transport"}, nil),
	}
}

func (c *irohCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.conns
	ch <- c.restarts
	ch <- c.streams
	ch <- c.dials
}

func (c *irohCollector) Collect(ch chan<- prometheus.Metric) {
	ep := c.ip.ep
	up := 0.0
	if _, ok := ep.Info(); ok {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	paths := map[string]int{"direct": 0, "relay": 0, "none": 0}
	for _, cn := range ep.Conns() {
		paths[cn.Path]++
	}
	for p, n := range paths {
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(n), p)
	}
	st := ep.Stats()
	ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(st.Restarts))
	ch <- prometheus.MustNewConstMetric(c.streams, prometheus.CounterValue, float64(st.StreamsIn), "in")
	ch <- prometheus.MustNewConstMetric(c.streams, prometheus.CounterValue, float64(st.StreamsOut), "out")
	c.ip.mu.Lock()
	defer c.ip.mu.Unlock()
	for _, t := range []string{"iroh", "libp2p"} {
		ch <- prometheus.MustNewConstMetric(c.dials, prometheus.CounterValue, float64(c.ip.byTransport[t]), t)
	}
}
