package peerexchange

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// newsFresh is how long a node stays news after this node first learnt of
// it: its descriptor is offered before older ones, so that an exchange run
// to spread it carries it even when the offer cannot hold everything.
const newsFresh = 30 * time.Second

// news spreads word of newcomers at once. Peer exchange alone is pull:
// a node that joined before a newcomer would hear of it only at its next
// maintenance round's one exchange, so a small mesh formed around one
// bootstrap node stays a star until then, and falls apart if that node
// leaves first (issue 12). Instead, when an exchange (either side of it)
// brings the descriptor of a node this node did not know, it runs an
// exchange with up to Config.NewsFanout connected peers other than the
// one that told it, and dials the newcomer (the maintainer wakes). Those
// peers do the same for what is news to them, so the word floods the mesh
// in a few hops and stops where everyone knows. Only new nodes are news, not
// a known node's re-signed descriptor, so the cost follows joins, not time.
//
// This node's own descriptor is news too, to every connected peer, when it
// first exists and whenever it says something new about reaching the node
// (SetSelf): the node's first exchanges run as soon as it connects, which
// may be before it has signed a descriptor, so a newcomer would otherwise
// stay unknown to the peers it met first.
type news struct {
	wake chan struct{}

	mu sync.Mutex
	// told are the peers that brought the news since the last spread:
	// they know it already.
	told map[peer.ID]bool
	// self is set when this node's own descriptor is news: then no peer
	// knows all of it, and told is ignored.
	self bool
}

func newNews() news {
	return news{wake: make(chan struct{}, 1), told: make(map[peer.ID]bool)}
}

// noteNewcomer records that from (empty if unknown) brought the descriptor
// of a node we did not know, and asks for a spread and a dial round.
func (p *Service) noteNewcomer(from peer.ID) {
	p.news.mu.Lock()
	if from != "" {
		p.news.told[from] = true
	}
	p.news.mu.Unlock()
	p.wakeNews()
	p.hooks.Dial()
}

// announceSelf asks for a spread of this node's own descriptor to
// connected peers.
func (p *Service) announceSelf() {
	p.news.mu.Lock()
	p.news.self = true
	p.news.mu.Unlock()
	p.wakeNews()
}

func (p *Service) wakeNews() {
	select {
	case p.news.wake <- struct{}{}:
	default:
	}
}

// Run spreads news until ctx ends: on news, one exchange with each of up
// to Config.NewsFanout connected peers that did not bring it (any of them
// when the news is this node's own descriptor), then a pause
// of Config.NewsInterval that gathers the news arriving meanwhile.
func (p *Service) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.news.wake:
		}
		p.news.mu.Lock()
		told, self := p.news.told, p.news.self
		p.news.told, p.news.self = make(map[peer.ID]bool), false
		p.news.mu.Unlock()
		var to []peer.ID
		for _, id := range p.Speakers() {
			if self || !told[id] {
				to = append(to, id)
			}
		}
		rand.Shuffle(len(to), func(i, j int) { to[i], to[j] = to[j], to[i] })
		var wg sync.WaitGroup
		for _, id := range to[:min(len(to), p.cfg.NewsFanout)] {
			wg.Go(func() {
				if _, err := p.Exchange(ctx, id); err != nil {
					p.hooks.Logger.Debug("peer exchange to spread news failed", "peer", id, "err", err)
				}
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.cfg.NewsInterval):
		}
	}
}

// Speakers are the directly connected libp2p peers that speak peer
// exchange, and the peers SetTransport's extra lists.
func (p *Service) Speakers() []peer.ID {
	h := p.h
	var out []peer.ID
	for _, id := range h.Network().Peers() {
		if h.Network().Connectedness(id) != network.Connected {
			continue
		}
		if ok, _ := h.Peerstore().SupportsProtocols(id, Protocol); len(ok) > 0 {
			out = append(out, id)
		}
	}
	p.mu.Lock()
	extra := p.extra
	p.mu.Unlock()
	if extra != nil {
		for _, id := range extra() {
			if id != h.ID() && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// freshFirst moves the descriptors learnt within newsFresh of now to the
// front of ks, keeping the order within each part.
func freshFirst(ks []*knownDescriptor, now time.Time) {
	slices.SortStableFunc(ks, func(a, b *knownDescriptor) int {
		fa, fb := now.Sub(a.learnt) < newsFresh, now.Sub(b.learnt) < newsFresh
		switch {
		case fa == fb:
			return 0
		case fa:
			return -1
		default:
			return 1
		}
	})
}
