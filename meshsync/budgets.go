package meshsync

import (
	"context"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/workbudget"
)

// Per-peer work budgets (spec/limits.md): the store time and rows the
// NEG-OPENs and REQs one peer sends may use, over all its streams, as the
// relay bounds a client address (package workbudget). A peer over its
// budget waits, at most maxWorkWait, then is refused with rate-limited.
const (
	// DefaultPeerMillisPerSecond is a quarter of a core's store time.
	DefaultPeerMillisPerSecond = 250
	// DefaultPeerRowsPerSecond lets a peer reconcile 500,000 records (the
	// largest session) every 25 s, and fetch 40 chunks of 500 a second.
	DefaultPeerRowsPerSecond = 20_000
	maxWorkWait              = 2 * time.Second
	// maxBudgetPeers bounds the table of budgets. A peer pushed out of it
	// starts afresh, which a fresh PeerID does anyway: per-peer bounds
	// hold a peer to its share, and the resource manager's per-address
	// limits bound how many peers one address can be.
	maxBudgetPeers = 4096
)

// peerBudgets holds each peer's workbudget.Budget.
type peerBudgets struct {
	cfg *Config

	mu sync.Mutex
	m  *lru.Cache[peer.ID, *workbudget.Budget]
}

func newPeerBudgets(cfg *Config) *peerBudgets {
	m, _ := lru.New[peer.ID, *workbudget.Budget](maxBudgetPeers)
	return &peerBudgets{cfg: cfg, m: m}
}

// largest is the largest single charge: a listing of MaxRecords, or a
// store call running to the session's timeout.
func (b *peerBudgets) largest() workbudget.Work {
	return workbudget.Work{Time: b.cfg.SessionTimeout, Rows: b.cfg.MaxRecords + 1}
}

func (b *peerBudgets) of(p peer.ID) *workbudget.Budget {
	w, ok := b.m.Get(p)
	if !ok {
		nb := workbudget.New(b.cfg.PeerMillisPerSecond, b.cfg.PeerRowsPerSecond, b.largest())
		w = &nb
		b.m.Add(p, w)
	}
	return w
}

// admit waits, within ctx and maxWorkWait, until p's budget allows a
// request, and then reserves w from it; the caller settles with settle.
// It returns "" to go ahead, or a NIP-01 reason to refuse.
func (b *peerBudgets) admit(ctx context.Context, p peer.ID, w workbudget.Work) string {
	for {
		b.mu.Lock()
		pb := b.of(p)
		now := time.Now()
		wait := time.Duration(0)
		if !pb.Reserve(now, w) {
			wait = pb.Wait(now)
		}
		b.mu.Unlock()
		if wait == 0 {
			return ""
		}
		refuse := wait > maxWorkWait
		// A refused peer waits as long as an admitted one would have, so
		// a loop of refused requests spins no faster than it may ask.
		t := time.NewTimer(min(wait, maxWorkWait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "closed: session ended"
		}
		if refuse {
			return fmt.Sprintf("rate-limited: your sync and lookup requests used their share of this node; retry in %ds", int((wait-maxWorkWait).Seconds())+1)
		}
	}
}

// settle charges p used in place of what it reserved.
func (b *peerBudgets) settle(p peer.ID, reserved, used workbudget.Work) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.of(p).Settle(time.Now(), reserved, used)
}
