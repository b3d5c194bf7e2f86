package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/iroh"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
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
	dc    *agent.Service
	peers map[peer.ID]iroh.Addr // from [iroh] peers
	log   *slog.Logger
	ready chan struct{} // closed at the helper's first bind
	// maxLearned bounds the relays taken from anchors' descriptors;
	// relayKey orders them (irohrelay.go).
	maxLearned int
	relayKey   []byte

	mu sync.Mutex
	// opened counts the streams the node opened, by transport and path
	// (irohroute.go).
	opened map[[2]string]uint64

	// ctx ends at close: it bounds the rounds and the streams served.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openIroh starts the iroh endpoint, or returns nil and why iroh is off
// (also logged): the node runs on libp2p alone then.
// streams is the file budget's iroh share (relay.FileBudget.Iroh).
func openIroh(opts Options, mp *meshPart, dc *agent.Service, streams int) (*irohPart, string) {
	ic := opts.Config.Iroh
	if !ic.Enabled {
		why := "[iroh] enabled = false"
		opts.Log.Info("iroh off: " + why)
		return nil, why
	}
	cfgPeers, _ := ic.ParsePeers() // validated with the config
	ctx, cancel := context.WithCancel(context.Background())
	ip := &irohPart{
		mp: mp, dc: dc, log: opts.Log, ready: make(chan struct{}), maxLearned: ic.MaxLearnedRelays,
		peers:  make(map[peer.ID]iroh.Addr),
		opened: make(map[[2]string]uint64),
		ctx:    ctx, cancel: cancel,
		relayKey: relayKeyFor(opts.Key.PrivateKey().Seed()),
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
			meshsync.ProtocolID:           ip.guard(ip.serveSync),
			string(transport.ProtocolID):  ip.guard(ip.serveDIDComm),
			string(peerexchange.Protocol): ip.guard(ip.servePEX),
		},
		Limits:    iroh.Limits{Streams: streams},
		OnRefused: ip.refused,
		OnReady: func(iroh.Info) {
			once.Do(func() { close(ip.ready) })
			// The descriptor lists iroh addresses: sign it again.
			mp.self.resign()
		},
		Log: opts.Log,
	})
	if err != nil {
		cancel()
		opts.Log.Warn("iroh off: the node runs on libp2p alone", "why", err.Error())
		return nil, err.Error()
	}
	ip.mu.Lock()
	ip.ep = ep
	ip.mu.Unlock()
	mp.self.irohAddr = ip.descriptorAddr
	mp.rounds.SetExtraPeers(ip.irohPeers)
	mp.sync.SetDialer(func(ctx context.Context, p peer.ID) (meshsync.Stream, error) {
		return ip.open(ctx, p, meshsync.ProtocolID)
	})
	if pex := mp.m.PeerExchange(); pex != nil {
		pex.SetTransport(func(ctx context.Context, p peer.ID) (peerexchange.Stream, error) {
			return ip.open(ctx, p, string(peerexchange.Protocol))
		}, ip.irohPeers)
	}
	dc.SetSender(ip.sendDIDComm)
	return ip, ""
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

// guard refuses the streams of a peer the mesh banned for misbehaviour
// (on either transport), and has the helper refuse it too.
func (ip *irohPart) guard(h iroh.Handler) iroh.Handler {
	return func(s *iroh.Stream) {
		p, err := s.RemotePeer()
		if err != nil {
			s.Close()
			return
		}
		if until, banned := ip.mp.m.Banned(p); banned {
			s.Close()
			if ep := ip.endpoint(); ep != nil {
				ep.Ban(s.Remote(), until)
			}
			return
		}
		h(s)
	}
}

// maxPenaltiesAtOnce bounds the penalties one refusal report adds: past a
// ban more change nothing.
const maxPenaltiesAtOnce = 64

// refused scores down a peer whose connections or streams the endpoint
// refused over its own per-peer bounds, as the resource manager's
// refusals do for a libp2p peer (spec/limits.md), and bans it over iroh
// too once the mesh bans it. Refusals at the endpoint's total bounds are
// nobody's fault alone, and are only counted.
func (ip *irohPart) refused(remote, reason string, n uint64) {
	switch reason {
	case iroh.RefusedPeerStreams, iroh.RefusedProtocolStreams, iroh.RefusedPeerConns:
	default:
		return
	}
	p, err := iroh.PeerID(remote)
	if err != nil {
		return
	}
	for range min(n, maxPenaltiesAtOnce) {
		ip.mp.m.Penalize(p, mesh.MisbehaviorIrohRefused)
	}
	if until, banned := ip.mp.m.Banned(p); banned {
		if ep := ip.endpoint(); ep != nil {
			ep.Ban(remote, until)
		}
	}
}

// endpoint is ip.ep for the endpoint's own goroutines (handlers and
// callbacks), which may start before openIroh has set it: ip.mu orders
// the two. Everything else runs after openIroh returns.
func (ip *irohPart) endpoint() *iroh.Endpoint {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return ip.ep
}

// servePEX answers a peer exchange a peer started over iroh: the same
// exchange as over libp2p, bounded and penalised by the same rules.
func (ip *irohPart) servePEX(s *iroh.Stream) {
	p, err := s.RemotePeer()
	pex := ip.mp.m.PeerExchange()
	if err != nil || pex == nil {
		s.Close()
		return
	}
	pex.ServeStream(s, p)
}

// serveDIDComm answers one DIDComm message on an iroh stream: the same
// framing as the libp2p binding (one length-prefixed frame each way). The
// endpoint's per-address limits apply to the remote endpoint, as libp2p's
// resource manager bounds a libp2p peer (spec/limits.md).
func (ip *irohPart) serveDIDComm(s *iroh.Stream) {
	defer s.Close()
	from := "iroh:" + s.Remote()
	transport.Serve(ip.ctx, s, func(ctx context.Context, packed []byte) ([]byte, error) {
		return ip.dc.HandleFrom(ctx, from, packed)
	})
}

// start runs anti-entropy with the peers reached over iroh only: those
// libp2p has no connection to, which the mesh's own round never picks;
// and, while the node is joining, peer exchange with each of them.
func (ip *irohPart) start() {
	ctx := ip.ctx
	ip.learnRelays(ctx, ip.ep.Relays(), ip.maxLearned)
	ip.wg.Go(func() { ip.mp.rounds.RunRounds(ctx, "iroh", ip.irohPeers) })
	ip.wg.Go(func() { periodic.Run(ctx, time.Second, irohJoinEvery, nil, ip.join) })
}

// irohJoinEvery is how often a joining node exchanges descriptors with
// its iroh peers.
const irohJoinEvery = 5 * time.Second

// join runs peer exchange with every iroh peer while the node is joining
// (peerexchange.Service.Joining), as the mesh does with every libp2p peer
// it connects to then; after that the mesh's maintenance round, whose
// speakers include the iroh peers, runs one exchange a round.
func (ip *irohPart) join() {
	pex := ip.mp.m.PeerExchange()
	if pex == nil || !pex.Joining() {
		return
	}
	if _, up := ip.ep.Info(); !up {
		return
	}
	for _, p := range ip.irohPeers() {
		pex.TryExchange(p)
	}
}

func (ip *irohPart) close() {
	ip.cancel()
	ip.wg.Wait()
	ip.ep.Close()
}

// addrOf is how iroh reaches p: the iroh address of its verified
// descriptor if peer exchange holds one, else [iroh] peers, else the bare
// id when an iroh connection to it is open (the helper reuses it).
func (ip *irohPart) addrOf(p peer.ID) (iroh.Addr, bool) {
	if pex := ip.mp.m.PeerExchange(); pex != nil {
		if info, ok := pex.Info(p); ok && info.Iroh != nil {
			a := info.Iroh
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

// SendDIDComm sends one packed DIDComm message to p and returns its
// answer, over the way the transport chooser picks (spec/iroh.md,
// "Choosing a transport"), falling back to the next when a stream cannot
// be opened. The node's own requests (agent.Service.Request: mediation,
// grants, receipts, fork proofs) are sent this way.
func (n *Node) SendDIDComm(ctx context.Context, p peer.ID, packed []byte) ([]byte, error) {
	if n.mesh == nil {
		return nil, errors.New("node: this front-end does not hold the node's mesh role; DIDComm goes through the one that does")
	}
	if n.iroh == nil {
		return transport.SendLibp2p(ctx, n.mesh.m.Host(), p, packed)
	}
	return n.iroh.sendDIDComm(ctx, p, packed)
}

func (ip *irohPart) sendDIDComm(ctx context.Context, p peer.ID, packed []byte) ([]byte, error) {
	s, err := ip.open(ctx, p, string(transport.ProtocolID))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return transport.Exchange(ctx, s, packed)
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

// irohCollector exports the iroh endpoint's state to /metrics. With iroh
// off (ip nil) it exports fleetmesh_iroh_up 0 alone, so that an alert on
// it works on every node; `fleetmesh status` says why.
type irohCollector struct {
	ip                                                 *irohPart
	up, conns, restarts, streams, dials, open, refused *prometheus.Desc
}

func newIrohCollector(ip *irohPart) *irohCollector {
	return &irohCollector{
		ip:       ip,
		up:       prometheus.NewDesc("fleetmesh_iroh_up", "1 while the iroh helper serves; 0 while iroh is off, starting or given up on (fleetmesh status says why).", nil, nil),
		conns:    prometheus.NewDesc("fleetmesh_iroh_connections", "Open iroh connections by selected path (direct, relay, none).", []string{"path"}, nil),
		restarts: prometheus.NewDesc("fleetmesh_iroh_helper_restarts_total", "Times the iroh helper stopped and was started again.", nil, nil),
		streams:  prometheus.NewDesc("fleetmesh_iroh_streams_total", "iroh streams by direction.", []string{"direction"}, nil),
		open:     prometheus.NewDesc("fleetmesh_iroh_open_streams", "iroh streams open now, both ways (each a socket to the helper; bounded by the file budget's iroh share).", nil, nil),
		refused:  prometheus.NewDesc("fleetmesh_iroh_refused_total", "Inbound iroh connections and streams refused, by the bound they hit (spec/limits.md).", []string{"reason"}, nil),
		dials:    prometheus.NewDesc("fleetmesh_transport_streams_total", "Sync, peer exchange and DIDComm streams this node opened, by the transport it chose and the path the stream took (direct, relay, unknown).", []string{"transport", "path"}, nil),
	}
}

func (c *irohCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.conns
	ch <- c.restarts
	ch <- c.streams
	ch <- c.dials
	ch <- c.open
	ch <- c.refused
}

func (c *irohCollector) Collect(ch chan<- prometheus.Metric) {
	if c.ip == nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
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
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(st.OpenStreams))
	for _, r := range iroh.RefusedReasons {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.Refused[r]), r)
	}
	c.ip.mu.Lock()
	defer c.ip.mu.Unlock()
	for _, t := range []string{transportIroh, transportLibp2p} {
		for _, p := range []string{pathDirect, pathRelay, pathUnknown} {
			ch <- prometheus.MustNewConstMetric(c.dials, prometheus.CounterValue, float64(c.ip.opened[[2]string{t, p}]), t, p)
		}
	}
}
