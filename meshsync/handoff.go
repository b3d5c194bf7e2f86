package meshsync

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
)

// Bounds of one hand-off round (spec/mesh-placement.md, "When a node
// stops holding a shard").
const (
	// handOffScan bounds the stored events one round reads, from where
	// the last round stopped.
	handOffScan = 20_000
	// handOffPage is how many events one store read returns.
	handOffPage = 500
	// handOffMax bounds the events one round hands off (and deletes).
	handOffMax = 2000
	// handOffBatch bounds the ids of one hand-off session, as a fetch's
	// REQ is bounded, and of one Local.Delete.
	handOffBatch = maxIDsPerReq
)

// handOffCursor is where the next round's read of the store starts: at
// or before until, skipping the ids of that second already read, or from
// the newest event while seen is nil.
type handOffCursor struct {
	until int64
	seen  map[[32]byte]bool
}

// handOffs is the responder's side of hand-offs: a node takes a hand-off
// only for shards it holds for durability by its own placement, and each
// one it takes moves those shards' epochs on. A node deletes the events of
// a shard it no longer keeps only if the shard's epoch has not moved since
// it began confirming them, so two nodes can never each delete an event
// on the word of the other (spec/mesh-placement.md says why).
type handOffs struct {
	mu    sync.Mutex
	holds func(shard int) bool
	epoch [mesh.ShardCount]uint64
}

// setHolds says which shards this node holds for durability; until it is
// set, every hand-off is refused.
func (h *handOffs) setHolds(holds func(shard int) bool) {
	h.mu.Lock()
	h.holds = holds
	h.mu.Unlock()
}

// accept takes a hand-off of shards if this node holds every one of them,
// moving their epochs on; otherwise it returns the NEG-ERR reason.
func (h *handOffs) accept(shards []int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range shards {
		if h.holds == nil || !h.holds(s) {
			return fmt.Errorf("blocked: this node does not hold shard %d for durability", s)
		}
	}
	for _, s := range shards {
		h.epoch[s]++
	}
	return nil
}

// epochs returns the current epochs of shards.
func (h *handOffs) epochs(shards []int) map[int]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int]uint64, len(shards))
	for _, s := range shards {
		out[s] = h.epoch[s]
	}
	return out
}

// deleteIf runs del with the ids of byShard whose shard's epoch is still
// the one in since and that release still says this node need not keep,
// holding off every hand-off it would accept until del returns.
func (h *handOffs) deleteIf(byShard map[int][][32]byte, since map[int]uint64, release func(shard int) bool, del func(ids [][32]byte) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids [][32]byte
	for _, s := range slices.Sorted(maps.Keys(byShard)) {
		if h.epoch[s] == since[s] && release(s) {
			ids = append(ids, byShard[s]...)
		}
	}
	return del(ids)
}

// tookPush reports whether a peer's OK to a pushed event (["OK", id, ok,
// reason]) means the peer now holds the event or holds what makes it
// obsolete: a newer version (superseded), its author's NIP-09 deletion
// (deleted), or its NIP-40 expiry passed (expired). A boundary refusal
// names its rule, so it never reads as one of these.
func tookPush(ok bool, parts []json.RawMessage) bool {
	if ok {
		return true
	}
	if len(parts) < 4 {
		return false
	}
	switch rawString(parts[3]) {
	case "blocked: superseded", "blocked: deleted", "blocked: expired":
		return true
	}
	return false
}

// HandOff offers peer p, as a holder of shards, the stored events among
// ids (all of them of those shards), and returns those of ids the peer
// holds now: it had them, took them, or holds what makes them obsolete.
// It is one sync session with the NEG-OPEN hand-off option
// (spec/mesh-sync.md) over the filter {"ids": ids}: nothing is fetched,
// and the peer refuses it unless it holds every one of shards. At most
// 500 ids.
func (s *Service) HandOff(ctx context.Context, p peer.ID, shards []int, ids [][32]byte) ([][32]byte, error) {
	if len(ids) == 0 || len(ids) > handOffBatch {
		return nil, fmt.Errorf("meshsync: hand off %d ids, want 1 to %d", len(ids), handOffBatch)
	}
	set, err := newShardSet(shards)
	if err != nil {
		return nil, fmt.Errorf("meshsync: %w", err)
	}
	ses := &session{f: nostr.Filter{IDs: ids}, set: set, shards: shards, handOff: true}
	if _, err := s.sync(ctx, p, ses); err != nil {
		return nil, err
	}
	lacked := make(map[[32]byte]bool, len(ses.have))
	for _, id := range ses.have {
		lacked[id] = true
	}
	var out [][32]byte
	for _, it := range ses.items {
		if !lacked[it.ID] || ses.took[it.ID] {
			out = append(out, it.ID)
		}
	}
	return out, nil
}

// runHandOff hands off and deletes, every sync interval, the stored
// events this node no longer needs keep: events of shards it neither holds
// for durability nor has clients interested in, that none of its own
// filters match. A node whose filters take every event keeps everything
// and runs none. The first round waits a sync interval, not FirstRound:
// a node that has just started places over the few storage nodes it knows
// yet, and would hand off shards it is about to hold again (safe, since
// holders must take them first, but wasted).
func (sc *Scheduler) runHandOff(ctx context.Context) {
	if slices.ContainsFunc(sc.cfg.Filters, takesAll) {
		return
	}
	periodic.Run(ctx, sc.cfg.Every, sc.cfg.Every, nil, func() { sc.handOffRound(ctx) })
}

// keeps reports whether the node keeps the events of shard whatever its
// filters say: it holds the shard for durability, or clients want it.
func (sc *Scheduler) keeps(shard int) bool {
	return sc.m.HoldsDurable(shard) || sc.m.Interested(shard)
}

// handOffCandidates reads up to handOffScan stored events from the
// round's cursor on, newest first, and returns, by shard, the ids of up to
// handOffMax that the node need not keep. The cursor moves on; it starts
// again from the newest event once the store's end is reached.
func (sc *Scheduler) handOffCandidates(ctx context.Context) (map[int][][32]byte, error) {
	out := map[int][][32]byte{}
	found, scanned := 0, 0
	cur := &sc.handOff
	for scanned < handOffScan && found < handOffMax {
		f := nostr.Filter{}
		if cur.seen != nil {
			f.Until, f.HasUntil = cur.until, true
		}
		// The ids of the cursor's second already read come again: the
		// limit leaves room for them, so a crowded second is read through.
		limit := handOffPage + len(cur.seen)
		read := 0
		err := sc.s.local.Query(ctx, &f, limit, func(ev *nostr.Event) bool {
			read++
			if cur.seen != nil && ev.CreatedAt == cur.until && cur.seen[ev.ID] {
				return true
			}
			scanned++
			if cur.seen == nil || ev.CreatedAt != cur.until {
				cur.until, cur.seen = ev.CreatedAt, map[[32]byte]bool{}
			}
			cur.seen[ev.ID] = true
			shard := mesh.ShardOf(ev.PubKey)
			if sc.keeps(shard) || slices.ContainsFunc(sc.cfg.Filters, func(f nostr.Filter) bool { return f.Matches(ev) }) ||
				(sc.s.policy != nil && sc.s.policy.Match(ev) != nil) {
				return true
			}
			out[shard] = append(out[shard], ev.ID)
			found++
			return found < handOffMax
		})
		if err != nil {
			return out, err
		}
		switch {
		case found >= handOffMax:
			return out, nil
		case read < limit:
			*cur = handOffCursor{} // the end: the next round starts from the newest
			return out, nil
		}
	}
	return out, nil
}

// handOffRound runs one round: the events the node need not keep are
// offered to every current holder of their shards, and those every holder
// then holds are deleted, in batches of at most handOffBatch. An
// event of a shard with no holder but this node, or that a holder did not
// take, stays.
func (sc *Scheduler) handOffRound(ctx context.Context) {
	cands, err := sc.handOffCandidates(ctx)
	if err != nil {
		sc.log.Warn("mesh: hand-off: reading the store", "err", err)
		return
	}
	if len(cands) == 0 {
		return
	}
	shards := slices.Sorted(maps.Keys(cands))
	since := sc.s.handOffs.epochs(shards)
	self := sc.m.Host().ID()
	pl := sc.m.Placement()
	holders := map[int][]peer.ID{}
	byHolder := map[peer.ID][]int{}
	for _, s := range shards {
		for _, p := range pl.Holders(s) {
			if p != self {
				holders[s] = append(holders[s], p)
				byHolder[p] = append(byHolder[p], s)
			}
		}
	}
	confirmed := map[[32]byte]int{}
	for _, p := range slices.Sorted(maps.Keys(byHolder)) {
		var ids [][32]byte
		for _, s := range byHolder[p] {
			ids = append(ids, cands[s]...)
		}
		for batch := range slices.Chunk(ids, handOffBatch) {
			took, err := sc.s.HandOff(ctx, p, batchShards(batch, cands), batch)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				sc.log.Debug("mesh: hand-off", "peer", p, "events", len(batch), "err", err)
				continue
			}
			for _, id := range took {
				confirmed[id]++
			}
		}
	}
	sure := map[int][][32]byte{}
	for _, s := range shards {
		if len(holders[s]) == 0 {
			continue
		}
		for _, id := range cands[s] {
			if confirmed[id] == len(holders[s]) {
				sure[s] = append(sure[s], id)
			}
		}
	}
	deleted := 0
	err = sc.s.handOffs.deleteIf(sure, since, func(s int) bool { return !sc.keeps(s) }, func(ids [][32]byte) error {
		for batch := range slices.Chunk(ids, handOffBatch) {
			n, err := sc.s.local.Delete(ctx, batch)
			deleted += n
			if err != nil {
				return err
			}
		}
		return nil
	})
	sc.handedOff.Add(uint64(deleted))
	if err != nil {
		sc.log.Warn("mesh: hand-off: deleting events other holders hold", "deleted", deleted, "err", err)
		return
	}
	if deleted > 0 {
		sc.log.Info("mesh: handed off events of shards this node no longer keeps", "deleted", deleted, "shards", len(sure))
	}
}

// batchShards lists the shards of the ids in batch, as cands groups them.
func batchShards(batch [][32]byte, cands map[int][][32]byte) []int {
	in := map[[32]byte]bool{}
	for _, id := range batch {
		in[id] = true
	}
	var out []int
	for s, ids := range cands {
		if slices.ContainsFunc(ids, func(id [32]byte) bool { return in[id] }) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
