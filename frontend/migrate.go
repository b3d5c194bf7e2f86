package frontend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/pgstore"
	"fleetmesh.org/fleetmesh/store"
)

// copyWorkers is how many saves a migration runs at once: PostgreSQL
// commits them in parallel where one connection would wait for each.
const copyWorkers = 8

// Copied counts what a migration did with the events it read.
type Copied struct {
	// Read is the number of events read from the Pebble store.
	Read int `json:"read"`
	// Results counts the saves by outcome: stored, duplicate (already in
	// the database: a migration run again), superseded, deleted, expired.
	Results map[string]int `json:"results"`
}

// CopyFromPebble copies every event of the Pebble store src into the
// PostgreSQL store dst, through dst's Save, so that the kind rules apply
// as they did in src (a deletion copied before what it deletes refuses
// it). It may be run again: what is already copied counts as duplicate.
// progress, if set, is called every 10,000 events read.
func CopyFromPebble(ctx context.Context, src *store.Store, dst *pgstore.Store, progress func(Copied)) (Copied, error) {
	out := Copied{Results: map[string]int{}}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	evs := make(chan *nostr.Event, 4*copyWorkers)
	for range copyWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range evs {
				res, err := dst.Save(ctx, ev)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("frontend: copy event %s: %w", ev.IDHex(), err)
					cancel()
				}
				if err == nil {
					out.Results[res.String()]++
				}
				mu.Unlock()
			}
		}()
	}
	var readErr error
	err := src.ListRaw(ctx, &nostr.Filter{}, int(^uint(0)>>1), func(r eventstore.Raw) bool {
		ev, err := r.Event()
		if err != nil {
			readErr = fmt.Errorf("frontend: decode a stored event: %w", err)
			return false
		}
		select {
		case evs <- ev:
		case <-ctx.Done():
			return false
		}
		mu.Lock()
		out.Read++
		if progress != nil && out.Read%10000 == 0 {
			progress(Copied{Read: out.Read})
		}
		mu.Unlock()
		return true
	})
	close(evs)
	wg.Wait()
	if firstErr != nil {
		return out, firstErr
	}
	if err := errors.Join(err, readErr); err != nil {
		return out, err
	}
	return out, ctx.Err()
}
