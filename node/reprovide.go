package node

import (
	"context"
	"log/slog"
	"time"

	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
)

const (
	// reprovideFirst is how long after start the first re-announcement
	// pass begins: long enough for placement to settle, so the pass
	// announces the shards the node really holds.
	reprovideFirst = 10 * time.Minute
	// reprovidePage is how many events one store query of a pass reads.
	reprovidePage = 500
	// reprovideBacklog is how full the announcement queue may be before a
	// pass waits for it to drain: the pass never crowds out announcements
	// of newly stored events, and never drops any of its own.
	reprovideBacklog = 256
	// reprovideSecondMax bounds the events of one second a pass reads at
	// once (the store's own scan bound applies too).
	reprovideSecondMax = 100_000
)

// runReprovide re-announces, every interval, the CIDs of the stored events
// in the shards the node holds for durability. A provider record lives 48
// hours in kad-dht, and a stored event is announced once when it arrives,
// so without this content routing would find only events younger than
// that (spec/mesh-placement.md, "Content routing").
func (mp *meshPart) runReprovide(ctx context.Context, st EventStore, every time.Duration, log *slog.Logger) {
	if st == nil || every <= 0 || !mp.m.ContentRouting() {
		return
	}
	periodic.Run(ctx, min(every, reprovideFirst), every, nil, func() {
		start := time.Now()
		n, err := mp.reprovidePass(ctx, st)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			log.Warn("mesh: re-announce", "queued", n, "err", err)
		default:
			log.Info("mesh: re-announced held events", "queued", n, "took", time.Since(start).Round(time.Second))
		}
	})
}

// reprovidePass walks the store from the newest event to the oldest and
// queues the announcement of each event in a durably held shard, waiting
// whenever the queue is busy. It returns how many it queued.
func (mp *meshPart) reprovidePass(ctx context.Context, st EventStore) (int, error) {
	queued := 0
	offer := func(ev *nostr.Event) error {
		if !mp.m.HoldsDurable(mesh.ShardOf(ev.PubKey)) {
			return nil
		}
		for mp.m.ProvideBacklog() >= reprovideBacklog {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
		if mp.m.ProvideEvent(ev) {
			queued++
		}
		return nil
	}
	query := func(f nostr.Filter, limit int) ([]*nostr.Event, error) {
		var out []*nostr.Event
		err := st.Query(ctx, &f, limit, func(ev *nostr.Event) bool {
			out = append(out, ev)
			return true
		})
		return out, err
	}
	// Pages go back in time by created_at. The oldest second of a full
	// page may go on past it, so that second is then read whole, and the
	// next page starts below it.
	f := nostr.Filter{}
	for {
		page, err := query(f, reprovidePage)
		if err != nil || len(page) == 0 {
			return queued, err
		}
		oldest := page[len(page)-1].CreatedAt
		full := len(page) == reprovidePage
		for _, ev := range page {
			if full && ev.CreatedAt == oldest {
				break // read whole below
			}
			if err := offer(ev); err != nil {
				return queued, err
			}
		}
		if !full {
			return queued, nil
		}
		second, err := query(nostr.Filter{Since: oldest, Until: oldest, HasUntil: true}, reprovideSecondMax)
		if err != nil {
			return queued, err
		}
		for _, ev := range second {
			if err := offer(ev); err != nil {
				return queued, err
			}
		}
		if oldest <= 0 {
			return queued, nil
		}
		f.Until, f.HasUntil = oldest-1, true
	}
}
