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
// budget waits, at most workbudget.MaxWait, then is refused with
// rate-limited.
const (
	// DefaultPeerMillisPerSecond is a quarter of a core's store time.
	DefaultPeerMillisPerSecond = 250
	// DefaultPeerRowsPerSecond lets a peer list the largest session
	// (500,000 records, five seconds of it) and fetch what it lacks right
	// after, in the same session: with a budget smaller than a session's
	// listing, the listing's debt would refuse every honest session's
	// fetches on a large store. A listing is about five times cheaper a
	// record than a REQ's row; the time budget bounds REQs first.
	DefaultPeerRowsPerSecond = 100_000
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

// admit waits, within ctx and workbudget.MaxWait, until p's budget
// allows a request, and then reserves w from it; the caller settles what
// it returns with settle. It returns "" to go ahead, or a NIP-01 reason
// to refuse.
func (b *peerBudgets) admit(ctx context.Context, p peer.ID, w workbudget.Work) (workbudget.Work, string) {
	var reserved workbudget.Work
	retry, err := workbudget.Admit(ctx, func() time.Duration {
		b.mu.Lock()
		defer b.mu.Unlock()
		pb, now := b.of(p), time.Now()
		r, ok := pb.Reserve(now, w)
		if ok {
			reserved = r
			return 0
		}
		return pb.Wait(now)
	})
	switch {
	case err != nil:
		return reserved, "closed: session ended"
	case retry > 0:
		return reserved, fmt.Sprintf("rate-limited: your sync and lookup requests used their share of this node; retry in %ds", int(retry.Seconds())+1)
	}
	return reserved, ""
}

// settle charges p used in place of what it reserved.
func (b *peerBudgets) settle(p peer.ID, reserved, used workbudget.Work) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.of(p).Settle(time.Now(), reserved, used)
}
