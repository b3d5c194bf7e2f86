package meshsync

import (
	"context"
	"math/rand/v2"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh/placement"
	"fleetmesh.org/fleetmesh/nostr"
)

// runDurable is the anti-entropy of the shards the node holds for
// durability: a round every sync interval, and one as soon as the
// placement changes, so that a newly held shard fills without waiting.
func (sc *Scheduler) runDurable(ctx context.Context) {
	periodic.Run(ctx, FirstRound, sc.cfg.Every, sc.m.PlacementChanges(), func() { sc.syncDurable(ctx) })
}

// syncDurable runs one round: sessions with co-holders chosen so that
// every held shard is reconciled with at least one other holder, at most
// DurablePeers sessions. A node whose own filters take every event (the
// default, "{}") reconciles everything in its filter sessions already and
// runs none.
func (sc *Scheduler) syncDurable(ctx context.Context) {
	if slices.ContainsFunc(sc.cfg.Filters, takesAll) {
		return
	}
	pl := sc.m.Placement()
	for _, s := range planDurableSync(pl, sc.m.Host().ID(), sc.m.Durable(), sc.cfg.DurablePeers, sc.prefer) {
		st, err := sc.s.SyncShards(ctx, s.peer, s.shards)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			sc.log.Debug("mesh: durable sync", "peer", s.peer, "shards", len(s.shards), "err", err)
			// A holder that cannot be reached may be dead: the mesh
			// probes it and places without it if so.
			sc.m.ReportUnreachable(s.peer)
			continue
		}
		if st.Need+st.Have > 0 {
			sc.log.Info("mesh: durable sync", "peer", s.peer, "shards", len(s.shards), "fetched", st.Fetched, "pushed", st.Pushed, "rounds", st.Rounds)
		}
	}
}

// takesAll reports whether f matches every event.
func takesAll(f nostr.Filter) bool {
	return f.IDs == nil && f.Authors == nil && f.Kinds == nil && len(f.Tags) == 0 &&
		f.Since == 0 && !f.HasUntil && !f.HasLimit && f.Search == ""
}

// durableSession is one anti-entropy session: the shards both this node
// and peer hold.
type durableSession struct {
	peer   peer.ID
	shards []int
}

// planDurableSync picks at most max co-holders of held (other than self)
// so that as many held shards as possible have one, greedily: each pick is
// the co-holder sharing most still uncovered shards, ties broken at
// random so that rounds spread over all co-holders, and among co-holders
// sharing as many, one prefer picks (a node with standing here,
// spec/standing.md "Use") before one it does not. A session covers every
// shard the two share, not only the uncovered ones: it costs one store
// scan either way. The holders themselves are the placement rule's, the
// same at every node; only whom this node repairs from is its own choice.
func planDurableSync(pl placement.Placement, self peer.ID, held []int, max int, prefer func(peer.ID) bool) []durableSession {
	shared := map[peer.ID][]int{}
	for _, s := range held {
		for _, p := range pl.Holders(s) {
			if p != self {
				shared[p] = append(shared[p], s)
			}
		}
	}
	candidates := make([]peer.ID, 0, len(shared))
	for p := range shared {
		candidates = append(candidates, p)
	}
	slices.Sort(candidates)
	rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	preferFirst(candidates, prefer)
	uncovered := map[int]bool{}
	for _, s := range held {
		uncovered[s] = true
	}
	var out []durableSession
	for len(out) < max && len(uncovered) > 0 {
		best, bestN := -1, 0
		for i, p := range candidates {
			n := 0
			for _, s := range shared[p] {
				if uncovered[s] {
					n++
				}
			}
			if n > bestN {
				best, bestN = i, n
			}
		}
		if best < 0 {
			break // no co-holder left for the uncovered shards
		}
		p := candidates[best]
		candidates = slices.Delete(candidates, best, best+1)
		for _, s := range shared[p] {
			delete(uncovered, s)
		}
		out = append(out, durableSession{peer: p, shards: shared[p]})
	}
	return out
}
