package meshsync

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
)

// Lookup asks peers, in parallel, for the events matching f (at most
// limit from each) and calls fn with each verified event the boundary lets
// in, deduplicated, as they arrive. It returns when every peer has answered
// or ctx ends; a peer that fails is skipped. fn is never called
// concurrently.
func (s *Service) Lookup(ctx context.Context, peers []peer.ID, f nostr.Filter, limit int, fn func(*nostr.Event)) {
	if limit <= 0 || len(peers) == 0 {
		return
	}
	f.Limit, f.HasLimit = min(limit, maxLookupLimit), true
	var mu sync.Mutex
	seen := make(map[[32]byte]struct{})
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.lookupOne(ctx, p, &f, func(ev *nostr.Event) {
				mu.Lock()
				defer mu.Unlock()
				if _, dup := seen[ev.ID]; dup || ctx.Err() != nil {
					return
				}
				seen[ev.ID] = struct{}{}
				fn(ev)
			})
		}()
	}
	wg.Wait()
}

func (s *Service) lookupOne(ctx context.Context, p peer.ID, f *nostr.Filter, fn func(*nostr.Event)) {
	str, done, err := s.openBound(ctx, p)
	if err != nil {
		return
	}
	defer done()
	r, w := msgio.NewVarintReaderSize(str, MaxFrameBytes), msgio.NewVarintWriter(str)
	if err := writeFrame(w, "REQ", "lookup", f); err != nil {
		return
	}
	for {
		typ, parts, err := readFrame(r)
		if err != nil || typ != "EVENT" || len(parts) < 3 {
			return
		}
		s.count(p, meter.Received, parts[2])
		ev := new(nostr.Event)
		if json.Unmarshal(parts[2], ev) != nil || ev.Verify() != nil || !f.Matches(ev) {
			s.log.Info("meshsync: peer sent an event that does not verify or match", "peer", p)
			return
		}
		if s.allowed(ev, boundary.ReplicateIn) {
			fn(ev)
		}
	}
}
