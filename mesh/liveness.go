package mesh

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
)

// liveness judges storage nodes down from what this node sees of them, so
// that a dead holder stops counting toward a shard's R at once rather than
// when its descriptor expires (a day later): the shard's next holder in
// rendezvous order takes its place and fills it by anti-entropy. A storage
// node is probed when its last connection closes and when a sync with it
// fails (Mesh.ReportUnreachable), if this node has ever been connected to
// it: Durability.HolderProbes dials in a row,
// Durability.HolderProbeInterval apart, must fail. A node judged down
// counts again as soon as it connects. Only nodes this node has been
// connected to or synced with are judged; in a large mesh others judge the
// rest, and their descriptors still expire.
type liveness struct {
	m   *Mesh
	sub event.Subscription

	mu      sync.Mutex
	down    map[peer.ID]time.Time
	probing map[peer.ID]bool
	// met are the peers this node has been connected to: only they are
	// judged, since a peer this node never reached may be alive behind a
	// NAT or a partition that others see through.
	met map[peer.ID]bool
}

func newLiveness(m *Mesh) *liveness {
	return &liveness{m: m, down: make(map[peer.ID]time.Time), probing: make(map[peer.ID]bool), met: make(map[peer.ID]bool)}
}

func (l *liveness) start() error {
	sub, err := l.m.h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		return err
	}
	l.sub = sub
	l.m.goroutine(l.watch)
	return nil
}

func (l *liveness) close() error {
	if l.sub == nil {
		return nil
	}
	return l.sub.Close()
}

// watch follows connections: a storage node that lost its last connection
// is probed; one that connects counts again.
func (l *liveness) watch(ctx context.Context) {
	tick := time.NewTicker(l.m.cfg.MaintainInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			l.sweep()
		case e, ok := <-l.sub.Out():
			if !ok {
				return
			}
			ev := e.(event.EvtPeerConnectednessChanged)
			switch ev.Connectedness {
			case network.Connected:
				l.up(ev.Peer)
			case network.NotConnected:
				l.probe(ev.Peer)
			}
		}
	}
}

// sweepMax bounds the probes one sweep starts.
const sweepMax = 16

// sweep probes, every maintenance interval, storage nodes the node shares
// a shard with in its placement and has no connection to: a connection
// that closed before the node knew the peer for a storage node, or while a
// probe was already running, is caught here.
func (l *liveness) sweep() {
	self := l.m.h.ID()
	pl := l.m.Placement()
	seen := map[peer.ID]bool{}
	started := 0
	for _, s := range pl.Shards(self) {
		for _, id := range pl.Holders(s) {
			if started >= sweepMax {
				return
			}
			if id == self || seen[id] || l.m.h.Network().Connectedness(id) == network.Connected {
				continue
			}
			seen[id] = true
			if l.probe(id) {
				started++
			}
		}
	}
}

// isDown reports whether id is judged down now.
func (l *liveness) isDown(id peer.ID) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, down := l.down[id]
	return down
}

func (l *liveness) up(id peer.ID) {
	l.mu.Lock()
	l.met[id] = true
	_, was := l.down[id]
	delete(l.down, id)
	l.mu.Unlock()
	if was {
		l.m.log.Info("mesh: storage node up again", "peer", id)
		l.m.placer.poke()
	}
}

// probe dials id in the background, unless it is not a storage node, is
// being probed or is down already, and judges it down if every dial fails.
// It reports whether it started a probe.
func (l *liveness) probe(id peer.ID) bool {
	if !l.isStorageNode(id) {
		return false
	}
	l.mu.Lock()
	_, down := l.down[id]
	if down || l.probing[id] || !l.met[id] {
		l.mu.Unlock()
		return false
	}
	l.probing[id] = true
	l.mu.Unlock()
	l.m.goroutine(func(ctx context.Context) {
		defer func() {
			l.mu.Lock()
			delete(l.probing, id)
			l.mu.Unlock()
		}()
		cfg := l.m.cfg.Durability
		var err error
		for i := range cfg.HolderProbes {
			if i > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(cfg.HolderProbeInterval):
				}
			}
			// The swarm's own dial backoff would answer a redial at once
			// with its last failure; a probe wants a fresh dial.
			if sw, ok := l.m.h.Network().(*swarm.Swarm); ok {
				sw.Backoff().Clear(id)
			}
			dctx, cancel := context.WithTimeout(ctx, l.m.cfg.DialTimeout)
			err = l.m.h.Connect(dctx, peer.AddrInfo{ID: id})
			cancel()
			if err == nil || ctx.Err() != nil {
				return
			}
		}
		l.mu.Lock()
		l.down[id] = time.Now()
		l.mu.Unlock()
		l.m.stats.add(func(s *Stats) { s.HoldersDown++ })
		l.m.log.Info("mesh: storage node down; placing without it", "peer", id, "err", err)
		l.m.placer.poke()
	})
	return true
}

// isStorageNode reports whether id's descriptor makes it a storage node.
func (l *liveness) isStorageNode(id peer.ID) bool {
	return l.m.pex != nil && l.m.pex.IsStorageNode(id)
}

// ReportUnreachable tells the mesh that a sync or lookup with id failed: a
// storage node is probed, and judged down if it stays unreachable.
func (m *Mesh) ReportUnreachable(id peer.ID) {
	if m.live != nil && m.h.Network().Connectedness(id) != network.Connected {
		m.live.probe(id)
	}
}
