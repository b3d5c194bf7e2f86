package meshsync

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
)

// Lookup asks peers, in parallel, for the events matching f (at most
// limit from each) and calls fn with each verified event the boundary lets
// in, deduplicated, as they arrive. Peers that did not answer their last
// lookup are left out (lookupsilence.go). It returns when every peer asked
// has answered; or, once one has answered, when the rest have had as long
// again as it took, and at least Config.LookupGrace, to answer too; or
// when ctx ends. A peer that has not answered by then, or that fails, is
// marked silent. fn is never called concurrently, nor after Lookup returns.
// It returns the peers it asked.
func (s *Service) Lookup(ctx context.Context, peers []peer.ID, f nostr.Filter, limit int, fn func(*nostr.Event)) (asked []peer.ID) {
	if limit <= 0 {
		return nil
	}
	now := time.Now()
	ask := make([]peer.ID, 0, len(peers))
	for _, p := range peers {
		if !s.silence.skip(p, now) {
			ask = append(ask, p)
		}
	}
	if len(ask) == 0 {
		return nil
	}
	f.Limit, f.HasLimit = min(limit, maxLookupLimit), true
	lctx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	var mu sync.Mutex
	seen := make(map[[32]byte]struct{})
	ended := make(chan bool, len(ask))
	for _, p := range ask {
		go func() {
			ended <- s.lookupOne(lctx, p, &f, func(ev *nostr.Event) {
				mu.Lock()
				defer mu.Unlock()
				if _, dup := seen[ev.ID]; dup || lctx.Err() != nil {
					return
				}
				seen[ev.ID] = struct{}{}
				fn(ev)
			})
		}()
	}
	var grace <-chan time.Time
	for left := len(ask); left > 0; left-- {
		select {
		case answered := <-ended:
			if answered && grace == nil && left > 1 {
				t := time.NewTimer(max(s.cfg.LookupGrace, time.Since(now)))
				defer t.Stop()
				grace = t.C
			}
			continue
		case <-grace:
		case <-ctx.Done():
		}
		// The wait is over: the stragglers' streams are reset, and
		// their goroutines end at once.
		cut(errStraggler)
		for ; left > 0; left-- {
			<-ended
		}
		break
	}
	return ask
}

// unanswered marks p silent and tells Config.Unanswered.
func (s *Service) unanswered(p peer.ID) {
	s.silence.mark(p, time.Now())
	if s.cfg.Unanswered != nil {
		s.cfg.Unanswered(p)
	}
}

// errStraggler is the cause a lookup's wait gives the streams of the
// peers it stopped waiting for.
var errStraggler = errors.New("meshsync: lookup stopped waiting for this peer")

// lookupOne asks p and calls fn with each event it sends. It reports
// whether p answered to the end (EOSE, or CLOSED with a reason). A peer
// that did not is marked silent: it failed, the lookup stopped waiting
// for it (errStraggler), or the caller's deadline passed; not when the
// caller cancelled (a client that left says nothing about p).
func (s *Service) lookupOne(ctx context.Context, p peer.ID, f *nostr.Filter, fn func(*nostr.Event)) (answered bool) {
	defer func() {
		if answered {
			s.silence.answered(p)
			return
		}
		if cause := context.Cause(ctx); cause == nil || errors.Is(cause, errStraggler) || errors.Is(cause, context.DeadlineExceeded) {
			s.unanswered(p)
		}
	}()
	str, done, err := s.openBound(ctx, p)
	if err != nil {
		return false
	}
	defer done()
	r, w := msgio.NewVarintReaderSize(str, MaxFrameBytes), msgio.NewVarintWriter(str)
	if err := writeFrame(w, "REQ", "lookup", f); err != nil {
		return false
	}
	for {
		typ, parts, err := readFrame(r)
		if err != nil {
			return false
		}
		if typ == "EOSE" || typ == "CLOSED" {
			return true
		}
		if typ != "EVENT" || len(parts) < 3 {
			return false
		}
		s.count(p, meter.Received, parts[2])
		ev := new(nostr.Event)
		if json.Unmarshal(parts[2], ev) != nil || ev.Verify() != nil || !f.Matches(ev) {
			s.log.Info("meshsync: peer sent an event that does not verify or match", "peer", p)
			return false
		}
		if s.allowed(ev, boundary.ReplicateIn) {
			fn(ev)
		}
	}
}
