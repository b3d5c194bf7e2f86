package mesh

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"

	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
)

// MDNSServiceName is the DNS-SD service name fleetmesh nodes announce on a
// LAN.
const MDNSServiceName = "_fleetmesh._udp"

// discovery keeps the node connected: it dials bootstrap peers and
// remembered peers while the node has fewer than Config.ConnLowWater
// connections, feeds the address book from identify, runs mDNS, and starts
// peer exchanges.
type discovery struct {
	m    *Mesh
	sub  event.Subscription
	wake chan struct{}

	// mdnsMu guards mdns, which runs or not as Config.MDNS and the node's
	// reachability say (setMDNS), and mdnsClosed, set by close so that a
	// late reachability change cannot start it again.
	mdnsMu     sync.Mutex
	mdns       mdns.Service
	mdnsClosed bool

	mu     sync.Mutex
	failed map[peer.ID]time.Time
	// bootFailed is the redial backoff of bootstrap peers (bootbackoff.go).
	bootFailed map[peer.ID]bootFailure
}

// newDiscovery makes the discovery part; start runs it. The two are apart
// so that the mesh's other parts can refer to it before anything runs.
func newDiscovery(m *Mesh) *discovery {
	return &discovery{m: m, wake: make(chan struct{}, 1), failed: make(map[peer.ID]time.Time), bootFailed: make(map[peer.ID]bootFailure)}
}

func (d *discovery) start() error {
	m := d.m
	for _, b := range m.boot {
		m.h.Peerstore().AddAddrs(b.ID, b.Addrs, peerstore.PermanentAddrTTL)
	}
	sub, err := m.h.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
	if err != nil {
		return err
	}
	d.sub = sub
	m.goroutine(d.identified)
	m.goroutine(d.maintain)
	if m.cfg.AddrBookDir != "" {
		m.goroutine(d.saveLoop)
	}
	// MDNSWhilePrivate starts too: nothing has found the node public yet.
	d.setMDNS(m.cfg.MDNS != MDNSOff)
	return nil
}

// setMDNS starts or stops mDNS. A node that cannot run it (a host with no
// up interface that takes multicast, say) logs why and goes on: mDNS is one
// way in of several, and a node found by no other stays reachable by them.
func (d *discovery) setMDNS(on bool) {
	d.mdnsMu.Lock()
	defer d.mdnsMu.Unlock()
	switch {
	case d.mdnsClosed || on == (d.mdns != nil):
	case on:
		s := mdns.NewMdnsService(d.m.h, MDNSServiceName, d)
		if err := s.Start(); err != nil {
			d.m.log.Warn("mesh: mDNS not started; peers on this LAN will not find the node by it", "err", err)
			return
		}
		d.mdns = s
		d.m.log.Info("mesh: mDNS started", "service", MDNSServiceName)
	default:
		d.mdns.Close()
		d.mdns = nil
		d.m.log.Info("mesh: mDNS stopped")
	}
}

// HandlePeerFound is mDNS's callback for a peer on the LAN.
func (d *discovery) HandlePeerFound(pi peer.AddrInfo) {
	if pi.ID == d.m.h.ID() {
		return
	}
	d.m.h.Peerstore().AddAddrs(pi.ID, pi.Addrs, peerstore.TempAddrTTL)
	d.m.book.Observe(pi.ID, pi.Addrs, time.Time{})
	d.m.wakeMaintainer()
}

// identified records every identified peer's listen addresses in the
// address book and, while the node is joining (pex.joining), starts a peer
// exchange with peers that speak it.
func (d *discovery) identified(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-d.sub.Out():
			if !ok {
				return
			}
			ev := e.(event.EvtPeerIdentificationCompleted)
			d.m.book.Observe(ev.Peer, ev.ListenAddrs, time.Now())
			d.forgetFailure(ev.Peer)
			if d.m.pex != nil && slices.Contains(ev.Protocols, peerexchange.Protocol) && d.m.pex.Joining() {
				d.m.pex.TryExchange(ev.Peer)
			}
		}
	}
}

// forgetFailure lets the maintainer dial id again before its redial
// backoff ends.
func (d *discovery) forgetFailure(id peer.ID) {
	d.mu.Lock()
	delete(d.failed, id)
	delete(d.bootFailed, id)
	d.mu.Unlock()
}

// wakeMaintainer asks the maintainer for a round now rather than at its
// next tick.
func (m *Mesh) wakeMaintainer() {
	if m.disc == nil {
		return
	}
	select {
	case m.disc.wake <- struct{}{}:
	default:
	}
}

func (d *discovery) maintain(ctx context.Context) {
	every := d.m.cfg.MaintainInterval
	periodic.Run(ctx, 0, every, d.wake, func() { d.round(ctx) })
}

// round dials peers while below the low water mark, then runs a peer
// exchange with one random connected peer.
func (d *discovery) round(ctx context.Context) {
	h := d.m.h
	if need := d.m.cfg.ConnLowWater - len(h.Network().Peers()); need > 0 {
		d.dial(ctx, d.candidates(min(need, d.m.cfg.ReconnectPeers)))
	}
	if d.m.pex != nil {
		if speakers := d.m.pex.Speakers(); len(speakers) > 0 {
			d.m.pex.TryExchange(speakers[rand.IntN(len(speakers))])
		}
	}
}

// candidates returns up to n peers to dial: bootstrap peers first, then
// remembered peers, most recently seen first, skipping connected peers and
// peers that failed within Config.RedialBackoff.
func (d *discovery) candidates(n int) []peer.AddrInfo {
	h := d.m.h
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for p, at := range d.failed {
		if now.Sub(at) > d.m.cfg.RedialBackoff {
			delete(d.failed, p)
		}
	}
	var out []peer.AddrInfo
	take := func(pi peer.AddrInfo) {
		if len(out) >= n || pi.ID == h.ID() {
			return
		}
		// A relayed (limited) connection counts: DCUtR, not a redial,
		// upgrades it to a direct one.
		if c := h.Network().Connectedness(pi.ID); c == network.Connected || c == network.Limited {
			return
		}
		if _, bad := d.failed[pi.ID]; bad {
			return
		}
		if f, bad := d.bootFailed[pi.ID]; bad && now.Before(f.retry) {
			return
		}
		for _, o := range out {
			if o.ID == pi.ID {
				return
			}
		}
		out = append(out, pi)
	}
	for _, b := range d.m.boot {
		take(b)
	}
	for _, e := range d.m.book.Recent(0) {
		if len(out) >= n {
			break
		}
		take(peer.AddrInfo{ID: e.ID, Addrs: e.Addrs})
	}
	return out
}

// dial connects to peers in parallel and waits for all the attempts.
func (d *discovery) dial(ctx context.Context, peers []peer.AddrInfo) {
	var wg sync.WaitGroup
	for _, pi := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A peer behind NAT may be reachable only through its relay
			// (a /p2p-circuit address from its descriptor): such a
			// limited connection is what hole punching starts from.
			dctx, cancel := context.WithTimeout(network.WithAllowLimitedConn(ctx, "fleetmesh: reach a peer behind NAT"), d.m.cfg.DialTimeout)
			defer cancel()
			if err := d.m.h.Connect(dctx, pi); err != nil {
				if ctx.Err() != nil {
					return
				}
				if d.isBootstrap(pi.ID) {
					d.bootstrapFailed(pi, err)
					return
				}
				d.mu.Lock()
				d.failed[pi.ID] = time.Now()
				d.mu.Unlock()
				d.m.log.Debug("dial failed", "peer", pi.ID, "err", err)
			}
		}()
	}
	wg.Wait()
}

// saveLoop refreshes connected peers' last-seen time and saves the address
// book every Config.AddrBookSaveInterval.
func (d *discovery) saveLoop(ctx context.Context) {
	every := d.m.cfg.AddrBookSaveInterval
	periodic.Run(ctx, every, every, nil, func() {
		d.touchConnected()
		if err := d.m.book.Save(); err != nil {
			d.m.log.Warn("saving the address book failed", "err", err)
		}
	})
}

func (d *discovery) touchConnected() {
	now := time.Now()
	for _, p := range d.m.h.Network().Peers() {
		d.m.book.Observe(p, nil, now)
	}
}

func (d *discovery) close() error {
	d.touchConnected()
	var errs []error
	if d.sub != nil {
		errs = append(errs, d.sub.Close())
	}
	d.mdnsMu.Lock()
	if d.mdns != nil {
		errs = append(errs, d.mdns.Close())
		d.mdns = nil
	}
	d.mdnsClosed = true
	d.mdnsMu.Unlock()
	return errors.Join(errs...)
}
