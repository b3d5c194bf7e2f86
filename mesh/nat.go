package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
)

// NATStatus is what a node knows of its own reachability and of the
// relaying it does and uses (spec/mesh-nat.md).
type NATStatus struct {
	// Reachability is what AutoNAT observed: public once any dial-back
	// reached one of the node's addresses, private once dial-backs
	// failed and none reached it, unknown before either.
	Reachability network.Reachability
	// RelayService is whether the node relays circuits for others now.
	RelayService bool
	// Relays are the relays the node holds a reservation with, in no
	// particular order.
	Relays []peer.ID
}

// nat is the mesh's NAT traversal: it combines AutoNAT v1's and v2's
// findings into one reachability, runs the circuit relay v2 service as
// Config.RelayService says, feeds AutoRelay with relay candidates, and
// counts and logs reservations and hole punches. go-libp2p does the
// protocols; this decides when and with whom.
type nat struct {
	cfg    Config
	log    *slog.Logger
	stats  *counters
	static []peer.AddrInfo

	// known returns relay candidates from verified descriptors; nil until
	// the mesh runs peer exchange.
	known func(n int) []peer.AddrInfo

	// circ meters and grants circuits (Config.Circuits); nil without
	// hooks. notified is the network it watches for relayed connections.
	circ     *circuits
	notified network.Network

	mu       sync.Mutex
	v1, v2   network.Reachability
	status   NATStatus
	relaySvc *relay.Relay
	onChange func(NATStatus)
}

func newNAT(cfg Config, log *slog.Logger, stats *counters) (*nat, error) {
	static, err := parseP2PAddrs("static relay", cfg.StaticRelays)
	if err != nil {
		return nil, err
	}
	n := &nat{cfg: cfg, log: log, stats: stats, static: static}
	if !cfg.Circuits.isZero() {
		n.circ = newCircuits(cfg.Circuits)
	}
	return n, nil
}

// relayCandidates is AutoRelay's peer source: the configured static relays
// first, then a random sample of peers whose verified descriptor says they
// are anchors or offer circuit relay. It sends at most num and closes the
// channel at once, so AutoRelay asks again after Config.RelaySearchInterval.
func (n *nat) relayCandidates(_ context.Context, num int) <-chan peer.AddrInfo {
	out := make(chan peer.AddrInfo, max(num, 0))
	defer close(out)
	cands := slices.Clone(n.static)
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	n.mu.Lock()
	known := n.known
	n.mu.Unlock()
	if known != nil && len(cands) < num {
		for _, c := range known(num) {
			if !slices.ContainsFunc(cands, func(s peer.AddrInfo) bool { return s.ID == c.ID }) {
				cands = append(cands, c)
			}
		}
	}
	for _, c := range cands[:min(num, len(cands))] {
		out <- c
	}
	return out
}

// start subscribes to the host's reachability and address events and, with
// RelayOn, starts the relay service. m must have its host.
func (n *nat) start(m *Mesh, onChange func(NATStatus)) error {
	sub, err := m.h.EventBus().Subscribe([]any{
		new(event.EvtLocalReachabilityChanged),
		new(event.EvtHostReachableAddrsChanged),
		new(event.EvtAutoRelayAddrsUpdated),
		new(event.EvtLocalAddressesUpdated),
	}, eventbus.Name("fleetmesh nat"))
	if err != nil {
		return fmt.Errorf("mesh: NAT events: %w", err)
	}
	n.mu.Lock()
	n.onChange = onChange
	if m.pex != nil {
		// A wider random sample, those with standing here first.
		n.known = func(k int) []peer.AddrInfo { return m.preferStanding(m.pex.Relays(relaySample*k), k) }
	}
	n.mu.Unlock()
	if n.circ != nil {
		n.notified = m.h.Network()
		n.notified.Notify(n.circ)
	}
	if n.cfg.RelayService == RelayOn {
		if err := n.setRelayService(m.h, true); err != nil {
			sub.Close()
			return err
		}
	}
	m.goroutine(func(ctx context.Context) {
		defer sub.Close()
		n.watch(ctx, m, sub)
	})
	return nil
}

// watch follows the host's events until ctx ends. It is the only writer of
// the status after start, so onChange sees changes in order.
func (n *nat) watch(ctx context.Context, m *Mesh, sub event.Subscription) {
	for {
		var e any
		select {
		case <-ctx.Done():
			return
		case e = <-sub.Out():
		}
		changed := false
		switch ev := e.(type) {
		case event.EvtLocalReachabilityChanged:
			changed = n.observe(m, ev.Reachability, nil)
		case event.EvtHostReachableAddrsChanged:
			v2 := network.ReachabilityUnknown
			switch {
			case len(ev.Reachable) > 0:
				v2 = network.ReachabilityPublic
			case len(ev.Unreachable) > 0:
				v2 = network.ReachabilityPrivate
			}
			changed = n.observe(m, network.ReachabilityUnknown, &v2)
		case event.EvtAutoRelayAddrsUpdated:
			changed = n.reservations(ev.RelayAddrs)
		case event.EvtLocalAddressesUpdated:
			// The addresses a descriptor lists changed (a relay
			// address came or went, an observed address was confirmed).
			changed = true
		}
		if changed {
			n.notify()
		}
	}
}

// observe records a v1 finding (v2 nil) or a v2 finding and applies the
// combined reachability: the relay service follows it in RelayAuto.
func (n *nat) observe(m *Mesh, v1 network.Reachability, v2 *network.Reachability) bool {
	n.mu.Lock()
	if v2 != nil {
		n.v2 = *v2
	} else {
		n.v1 = v1
	}
	old := n.status.Reachability
	now := combineReachability(n.v1, n.v2)
	n.status.Reachability = now
	v1Now, v2Now := n.v1, n.v2
	n.mu.Unlock()
	if now == old {
		return false
	}
	n.stats.add(func(s *Stats) { s.ReachabilityChanges++ })
	n.log.Info("mesh: reachability changed", "from", reachabilityName(old), "to", reachabilityName(now),
		"autonat_v1", reachabilityName(v1Now), "autonat_v2", reachabilityName(v2Now))
	if n.cfg.MDNS == MDNSWhilePrivate && m.disc != nil && now != network.ReachabilityUnknown {
		// While unknown, mDNS stays as it was, as the relay service does.
		m.disc.setMDNS(now == network.ReachabilityPrivate)
	}
	if n.cfg.RelayService == RelayAuto {
		switch now {
		case network.ReachabilityPublic:
			if err := n.setRelayService(m.h, true); err != nil {
				n.log.Warn("mesh: starting the relay service failed", "err", err)
			}
		case network.ReachabilityPrivate:
			// A relay nobody can reach is useless; while unknown, a
			// relay that was reachable keeps serving.
			if err := n.setRelayService(nil, false); err != nil {
				n.log.Warn("mesh: stopping the relay service failed", "err", err)
			}
		}
	}
	return true
}

// combineReachability merges AutoNAT v1's verdict on the host with v2's on
// its addresses. A successful dial-back by either proves the node public;
// otherwise a failed one by either makes it private.
func combineReachability(v1, v2 network.Reachability) network.Reachability {
	switch {
	case v1 == network.ReachabilityPublic || v2 == network.ReachabilityPublic:
		return network.ReachabilityPublic
	case v1 == network.ReachabilityPrivate || v2 == network.ReachabilityPrivate:
		return network.ReachabilityPrivate
	}
	return network.ReachabilityUnknown
}

func reachabilityName(r network.Reachability) string {
	switch r {
	case network.ReachabilityPublic:
		return "public"
	case network.ReachabilityPrivate:
		return "private"
	}
	return "unknown"
}

// setRelayService starts the circuit relay v2 service on h with the
// configured limits, or stops it (h unused).
func (n *nat) setRelayService(h host.Host, on bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if on == (n.relaySvc != nil) {
		return nil
	}
	if !on {
		err := n.relaySvc.Close()
		n.relaySvc = nil
		n.status.RelayService = false
		n.log.Info("mesh: relay service stopped")
		return err
	}
	l := n.cfg.RelayLimits
	rc := relay.DefaultResources()
	rc.Limit = &relay.RelayLimit{Duration: l.CircuitDuration.Duration, Data: l.CircuitBytes}
	rc.ReservationTTL = l.ReservationTTL.Duration
	rc.MaxReservations = l.MaxReservations
	rc.MaxReservationsPerIP = l.MaxReservationsPerIP
	rc.MaxCircuits = l.MaxCircuits
	ropts := []relay.Option{relay.WithResources(rc), relay.WithMetricsTracer(relayTracer{n})}
	if n.circ != nil {
		// Metered and granted per peer (circuits.go).
		h = relayHost{Host: h, c: n.circ}
		ropts = append(ropts, relay.WithACL(circuitACL{c: n.circ, log: n.log.Info}))
	}
	svc, err := relay.New(h, ropts...)
	if err != nil {
		return fmt.Errorf("mesh: relay service: %w", err)
	}
	n.relaySvc = svc
	n.status.RelayService = true
	n.log.Info("mesh: relay service started", "max_reservations", l.MaxReservations, "max_circuits", l.MaxCircuits,
		"circuit_duration", l.CircuitDuration.Duration, "circuit_bytes", l.CircuitBytes)
	return nil
}

// reservations updates the relays held from AutoRelay's circuit addresses
// (…/p2p/<relay>/p2p-circuit) and reports whether they changed.
func (n *nat) reservations(addrs []ma.Multiaddr) bool {
	var now []peer.ID
	for _, a := range addrs {
		relayPart, _ := ma.SplitFunc(a, func(c ma.Component) bool { return c.Protocol().Code == ma.P_CIRCUIT })
		if _, last := ma.SplitLast(relayPart); last != nil && last.Protocol().Code == ma.P_P2P {
			if id := peer.ID(last.RawValue()); !slices.Contains(now, id) {
				now = append(now, id)
			}
		}
	}
	n.mu.Lock()
	old := n.status.Relays
	n.status.Relays = now
	n.mu.Unlock()
	changed := false
	for _, id := range now {
		if !slices.Contains(old, id) {
			changed = true
			n.stats.add(func(s *Stats) { s.RelayReservations++ })
			n.log.Info("mesh: relay reservation made", "relay", id)
		}
	}
	for _, id := range old {
		if !slices.Contains(now, id) {
			changed = true
			n.log.Info("mesh: relay reservation ended", "relay", id)
		}
	}
	return changed
}

func (n *nat) notify() {
	n.mu.Lock()
	f := n.onChange
	n.mu.Unlock()
	if f != nil {
		f(n.snapshot())
	}
}

func (n *nat) snapshot() NATStatus {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.status
	s.Relays = slices.Clone(s.Relays)
	return s
}

// close stops the relay service; the watcher stops with the mesh's
// context.
func (n *nat) close() error {
	n.mu.Lock()
	n.onChange = nil
	n.mu.Unlock()
	if n.notified != nil {
		n.notified.StopNotify(n.circ)
	}
	return n.setRelayService(nil, false)
}

// Trace is holepunch.EventTracer: it counts and logs the outcome of every
// hole punch attempt, on the side that started it and on the other.
func (n *nat) Trace(e *holepunch.Event) {
	switch ev := e.Evt.(type) {
	case *holepunch.EndHolePunchEvt:
		if ev.Success {
			n.stats.add(func(s *Stats) { s.HolePunchSuccesses++ })
			n.log.Info("mesh: hole punch succeeded", "peer", e.Remote, "took", ev.EllapsedTime)
		} else {
			n.stats.add(func(s *Stats) { s.HolePunchFailures++ })
			n.log.Info("mesh: hole punch failed", "peer", e.Remote, "took", ev.EllapsedTime, "err", ev.Error)
		}
	case *holepunch.DirectDialEvt:
		n.log.Debug("mesh: direct dial before hole punching", "peer", e.Remote, "ok", ev.Success, "err", ev.Error)
	case *holepunch.ProtocolErrorEvt:
		n.log.Debug("mesh: hole punch protocol error", "peer", e.Remote, "err", ev.Error)
	}
}

// relayTracer is the relay service's relay.MetricsTracer: it counts into
// Stats instead of a Prometheus registry.
type relayTracer struct{ n *nat }

func (relayTracer) RelayStatus(bool)               {}
func (relayTracer) ConnectionClosed(time.Duration) {}
func (relayTracer) ReservationClosed(int)          {}

func (t relayTracer) ConnectionOpened() {
	t.n.stats.add(func(s *Stats) { s.RelayCircuits++ })
}

func (t relayTracer) ConnectionRequestHandled(status pbv2.Status) {
	if status != pbv2.Status_OK {
		t.n.stats.add(func(s *Stats) { s.RelayCircuitsRefused++ })
		t.n.log.Debug("mesh: relay service refused a circuit", "status", status.String())
	}
}

func (t relayTracer) ReservationAllowed(renewal bool) {
	if !renewal {
		t.n.stats.add(func(s *Stats) { s.RelayReservationsServed++ })
	}
}

func (t relayTracer) ReservationRequestHandled(status pbv2.Status) {
	if status != pbv2.Status_OK {
		t.n.stats.add(func(s *Stats) { s.RelayReservationsRefused++ })
		t.n.log.Debug("mesh: relay service refused a reservation", "status", status.String())
	}
}

func (t relayTracer) BytesTransferred(cnt int) {
	t.n.stats.add(func(s *Stats) { s.RelayBytes += uint64(cnt) })
}
