package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"fleetmesh.org/fleetmesh/nostr"
)

// errNoDHT is returned by content routing calls when the node runs no DHT.
var errNoDHT = errors.New("mesh: content routing needs the DHT (DHT mode off)")

// provider announces, in the DHT, the CIDs of the events this node holds
// for durability (spec/mesh-placement.md, "Content routing"). The cost is
// bounded three ways: a queue of at most Durability.ProvideQueue CIDs
// (further ones are dropped and counted), rounds of at most ProvideBatch
// CIDs no closer together than ProvideInterval, and at most
// ProvideConcurrency announcements running at once.
//
// It uses the DHT's classic Provide, one lookup per CID, rather than
// go-libp2p-kad-dht's SweepingProvider: the sweeping provider keeps every
// key it was ever given in a persistent keystore of its own and
// reprovides all of them every cycle, so its cost grows with everything
// the node ever held, where fleetmesh announces each durably held event
// once, through a queue whose bound is the whole cost.
type provider struct {
	m    *Mesh
	wake chan struct{}

	mu      sync.Mutex
	queue   [][32]byte
	pending map[[32]byte]bool
}

func newProvider(m *Mesh) *provider {
	return &provider{m: m, wake: make(chan struct{}, 1), pending: make(map[[32]byte]bool)}
}

// ProvideEvent queues the announcement of ev's CID in the DHT if this
// node holds ev's shard for durability and ev may be replicated. It
// reports whether the CID is queued (or already was). It never blocks:
// when the queue is full the CID is dropped and counted.
func (m *Mesh) ProvideEvent(ev *nostr.Event) bool {
	if m.prov == nil || nostr.ClassOf(ev.Kind) == nostr.Ephemeral || !m.HoldsDurable(ShardOf(ev.PubKey)) {
		return false
	}
	if ok, _ := m.policy(ev); !ok {
		return false
	}
	return m.prov.enqueue(ev.ID)
}

func (p *provider) enqueue(id [32]byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending[id] {
		return true
	}
	if len(p.queue) >= p.m.cfg.Durability.ProvideQueue {
		p.m.stats.add(func(s *Stats) { s.ProvideDropped++ })
		return false
	}
	p.queue = append(p.queue, id)
	p.pending[id] = true
	p.m.stats.add(func(s *Stats) { s.ProvideQueued++ })
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// take removes up to n CIDs from the head of the queue.
func (p *provider) take(n int) [][32]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	n = min(n, len(p.queue))
	out := append([][32]byte(nil), p.queue[:n]...)
	p.queue = p.queue[n:]
	for _, id := range out {
		delete(p.pending, id)
	}
	if len(p.queue) == 0 {
		p.queue = nil // let the old backing array go
	}
	return out
}

func (p *provider) run(ctx context.Context) {
	cfg := p.m.cfg.Durability
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		for {
			batch := p.take(cfg.ProvideBatch)
			if len(batch) == 0 {
				break
			}
			start := time.Now()
			p.announce(ctx, batch)
			// Rate limit: the next round starts no sooner than
			// ProvideInterval after this one started.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(cfg.ProvideInterval))):
			}
		}
	}
}

// announce provides each CID of batch, ProvideConcurrency at a time.
func (p *provider) announce(ctx context.Context, batch [][32]byte) {
	cfg := p.m.cfg.Durability
	sem := make(chan struct{}, cfg.ProvideConcurrency)
	var wg sync.WaitGroup
	for _, id := range batch {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, cfg.ProvideTimeout)
			defer cancel()
			if err := p.m.dht.Provide(pctx, nostr.IDToCID(id), true); err != nil {
				p.m.stats.add(func(s *Stats) { s.ProvideFailed++ })
				p.m.log.Debug("provide failed", "cid", nostr.IDToCID(id), "err", err)
				return
			}
			p.m.stats.add(func(s *Stats) { s.Provided++ })
		})
	}
	wg.Wait()
}

// ContentRouting reports whether the node runs a DHT, and so can announce
// and find event CIDs.
func (m *Mesh) ContentRouting() bool { return m.dht != nil }

// FindProviders searches the DHT for at most max nodes, other than this
// one, that announced the CID of event id, and adds their addresses to the
// peerstore so that they can be dialled. It returns what it found when
// the search ends or ctx does.
func (m *Mesh) FindProviders(ctx context.Context, id [32]byte, max int) ([]peer.AddrInfo, error) {
	if m.dht == nil {
		return nil, errNoDHT
	}
	if max <= 0 {
		return nil, fmt.Errorf("mesh: find providers: max %d, want at least 1", max)
	}
	m.stats.add(func(s *Stats) { s.ProviderLookups++ })
	var out []peer.AddrInfo
	// One more than max, since this node may be among the providers. The
	// channel closes once that many are found or ctx ends.
	for ai := range m.dht.FindProvidersAsync(ctx, nostr.IDToCID(id), max+1) {
		if ai.ID == m.h.ID() || len(out) == max {
			continue
		}
		if len(ai.Addrs) > 0 {
			m.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
		}
		out = append(out, ai)
	}
	m.stats.add(func(s *Stats) { s.ProvidersFound += uint64(len(out)) })
	if len(out) == 0 && ctx.Err() != nil {
		return nil, fmt.Errorf("mesh: find providers of %x: %w", id, ctx.Err())
	}
	return out, nil
}

// ProvideBacklog is how many event CIDs wait in the announcement queue.
func (m *Mesh) ProvideBacklog() int {
	if m.prov == nil {
		return 0
	}
	m.prov.mu.Lock()
	defer m.prov.mu.Unlock()
	return len(m.prov.queue)
}
