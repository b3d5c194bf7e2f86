package meshsync

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Peers that do not answer a lookup leave the lookup set at once, so that
// a dead or stalled peer costs one REQ its wait, not every REQ until the
// connection times out or the mesh's liveness judges the peer down (a
// QUIC connection to a killed process stays "connected" for its idle
// timeout, and a stream opened on it waits for its deadline). A silent
// peer is asked again, by one lookup, after silenceRetry, then after twice
// as long each time it stays silent, up to silenceRetryMax; anything it
// answers (a lookup, a sync session, a session it opens here) brings it
// back at once. spec/mesh-sync.md "Lookups" and spec/limits.md list these.
const (
	// silenceRetry is how long a peer that did not answer a lookup is
	// left out of lookups before one lookup asks it again.
	silenceRetry = 30 * time.Second
	// silenceRetryMax bounds the doubled wait.
	silenceRetryMax = 10 * time.Minute
	// maxSilent bounds the peers remembered as silent; over it the
	// oldest entry is forgotten (that peer is asked again).
	maxSilent = 4096
)

// silence remembers the peers that did not answer their last lookup.
type silence struct {
	mu    sync.Mutex
	peers map[peer.ID]*silent
}

type silent struct {
	since time.Time
	retry time.Time     // when one lookup may ask it again
	wait  time.Duration // the wait that set retry
}

// skip reports whether a lookup should leave p out now. A silent peer
// whose retry time has come is not skipped, once: its next retry is set
// at once, so concurrent lookups do not all wait on it.
func (s *silence) skip(p peer.ID, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.peers[p]
	if e == nil {
		return false
	}
	if now.Before(e.retry) {
		return true
	}
	e.wait = min(2*e.wait, silenceRetryMax)
	e.retry = now.Add(e.wait)
	return false
}

// mark records that p did not answer a lookup.
func (s *silence) mark(p peer.ID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peers == nil {
		s.peers = make(map[peer.ID]*silent)
	}
	if s.peers[p] != nil {
		return // a retry that failed: skip set its next retry already
	}
	if len(s.peers) >= maxSilent {
		var oldest peer.ID
		var at time.Time
		for id, e := range s.peers {
			if oldest == "" || e.since.Before(at) {
				oldest, at = id, e.since
			}
		}
		delete(s.peers, oldest)
	}
	s.peers[p] = &silent{since: now, retry: now.Add(silenceRetry), wait: silenceRetry}
}

// answered records that p answered: it is asked again at once.
func (s *silence) answered(p peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.peers, p)
}

// count is how many peers are silent now, for /metrics.
func (s *silence) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peers)
}
