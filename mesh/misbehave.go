package mesh

import (
	"context"
	"math"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	ma "github.com/multiformats/go-multiaddr"
)

// Misbehaviour reasons, as Stats.Misbehavior counts them (spec/limits.md).
const (
	MisbehaviorInvalidGossip = "invalid_gossip"     // an event GossipSub's validator rejected
	MisbehaviorPEXViolation  = "pex_violation"      // a peer exchange out of protocol
	MisbehaviorPEXFlood      = "pex_flood"          // exchanges started more often than allowed
	MisbehaviorStreamsRefuse = "streams_over_limit" // streams the resource manager refused
	MisbehaviorIrohRefused   = "iroh_over_limit"    // iroh connections or streams over their bounds
	MisbehaviorSyncViolation = "sync_violation"     // a sync or lookup stream out of protocol (meshsync)
)

// Penalty weights: a peer whose decayed score reaches banScore is
// disconnected and refused for banFor. One invalid message is a mistake a
// peer on an old version might make; twenty in a few minutes is not.
var misbehaviorWeight = map[string]float64{
	MisbehaviorInvalidGossip: 0.5,
	MisbehaviorPEXViolation:  3,
	MisbehaviorPEXFlood:      1,
	MisbehaviorStreamsRefuse: 0.25,
	MisbehaviorIrohRefused:   0.25,
	MisbehaviorSyncViolation: 2,
}

const (
	banScore = 10
	banFor   = 10 * time.Minute
	// scoreHalfLife is how fast a peer's score decays.
	scoreHalfLife = 5 * time.Minute
	// maxScored bounds the peers a node keeps a score for.
	maxScored = 4096
)

// misbehavior scores peers down for what they did wrong; at banScore it
// disconnects the peer and refuses its connections for banFor. Scores
// and bans live in bounded LRU tables, so a stream of fresh PeerIDs costs
// bounded memory (and a fresh identity starts with nothing to lose, which
// is why GossipSub's own scoring and the resource manager's per-peer
// limits apply from the first message).
type misbehavior struct {
	m *Mesh

	mu     sync.Mutex
	scores *lru.Cache[peer.ID, *peerScore]
	banned *lru.Cache[peer.ID, time.Time]

	// disconnect hands peers to run, which closes their connections: a
	// penalty may be counted inside the resource manager, where closing
	// a connection would deadlock.
	disconnect chan peer.ID
}

type peerScore struct {
	score float64
	at    time.Time
}

func newMisbehavior(m *Mesh) *misbehavior {
	scores, _ := lru.New[peer.ID, *peerScore](maxScored)
	banned, _ := lru.New[peer.ID, time.Time](maxScored)
	return &misbehavior{m: m, scores: scores, banned: banned, disconnect: make(chan peer.ID, 64)}
}

// penalize counts one misbehaviour of p.
func (b *misbehavior) penalize(p peer.ID, reason string) {
	if p == "" || (b.m.h != nil && p == b.m.h.ID()) {
		return
	}
	b.m.stats.add(func(s *Stats) { s.Misbehavior[reason]++ })
	now := time.Now()
	b.mu.Lock()
	ps, ok := b.scores.Get(p)
	if !ok {
		ps = &peerScore{at: now}
		b.scores.Add(p, ps)
	}
	ps.score = ps.score*math.Exp2(-now.Sub(ps.at).Seconds()/scoreHalfLife.Seconds()) + misbehaviorWeight[reason]
	ps.at = now
	ban := ps.score >= banScore
	if ban {
		ps.score = 0
		b.banned.Add(p, now.Add(banFor))
	}
	b.mu.Unlock()
	if ban {
		b.m.stats.add(func(s *Stats) { s.PeersBanned++ })
		b.m.log.Info("mesh: peer disconnected for misbehaviour", "peer", p, "last", reason)
		select {
		case b.disconnect <- p:
		default:
			// run is behind; the peer's next connection is refused.
		}
	}
}

// Penalize counts one misbehaviour of p for reason, one of the
// Misbehavior* constants: what the mesh's own protocols do, and what a
// protocol served beside it (meshsync, or the node's iroh side) saw.
func (m *Mesh) Penalize(p peer.ID, reason string) { m.misb.penalize(p, reason) }

// Banned reports whether p is refused now for misbehaviour, and until
// when.
func (m *Mesh) Banned(p peer.ID) (time.Time, bool) { return m.misb.bannedUntil(p) }

// isBanned says whether p is refused now.
func (b *misbehavior) isBanned(p peer.ID) bool {
	_, ok := b.bannedUntil(p)
	return ok
}

// bannedUntil says whether p is refused now, and until when.
func (b *misbehavior) bannedUntil(p peer.ID) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.banned.Get(p)
	if ok && time.Now().After(until) {
		b.banned.Remove(p)
		return time.Time{}, false
	}
	return until, ok
}

// run closes the connections of the peers it is handed, until the mesh
// closes. New connections of banned peers never get this far: banGater
// refuses them.
func (b *misbehavior) run(ctx context.Context) {
	for {
		select {
		case p := <-b.disconnect:
			b.m.h.ConnManager().TagPeer(p, "fleetmesh-misbehaving", -1000)
			b.m.h.Network().ClosePeer(p)
		case <-ctx.Done():
			return
		}
	}
}

// banGater refuses banned peers at the earliest point their identity is
// known: a dial is never started, and an inbound connection is closed
// right after its security handshake (which is what proves the PeerID),
// before the muxer, identify or any stream. An address cannot be refused
// earlier without refusing every peer behind it; the resource manager's
// per-address limits (resources.go) bound how often one address may try.
type banGater struct{ b *misbehavior }

var _ connmgr.ConnectionGater = banGater{}

func (g banGater) InterceptPeerDial(p peer.ID) bool { return !g.b.isBanned(p) }

func (banGater) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }

func (banGater) InterceptAccept(network.ConnMultiaddrs) bool { return true }

func (g banGater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	if g.b.isBanned(p) {
		g.b.m.stats.add(func(s *Stats) { s.BannedRefused++ })
		return false
	}
	return true
}

func (banGater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

// resourceReporter tells misbehavior of the streams the resource manager
// refused a peer. Every other event is ignored.
type resourceReporter struct{ b *misbehavior }

var _ rcmgr.MetricsReporter = resourceReporter{}

func (r resourceReporter) BlockStream(p peer.ID, dir network.Direction) {
	if dir == network.DirInbound {
		r.b.penalize(p, MisbehaviorStreamsRefuse)
	}
}
func (r resourceReporter) BlockProtocolPeer(_ protocol.ID, p peer.ID) {
	r.b.penalize(p, MisbehaviorStreamsRefuse)
}
func (resourceReporter) AllowConn(network.Direction, bool)      {}
func (resourceReporter) BlockConn(network.Direction, bool)      {}
func (resourceReporter) AllowStream(peer.ID, network.Direction) {}
func (resourceReporter) AllowPeer(peer.ID)                      {}
func (resourceReporter) BlockPeer(peer.ID)                      {}
func (resourceReporter) AllowProtocol(protocol.ID)              {}
func (resourceReporter) BlockProtocol(protocol.ID)              {}
func (resourceReporter) AllowService(string)                    {}
func (resourceReporter) BlockService(string)                    {}
func (resourceReporter) BlockServicePeer(string, peer.ID)       {}
func (resourceReporter) AllowMemory(int)                        {}
func (resourceReporter) BlockMemory(int)                        {}
