package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
	"fleetmesh.org/fleetmesh/standing"
)

// standingPart is the node's standing view (spec/standing.md), fed from
// its accounting: at every accounting window it takes in the records the
// accounting holds (new ones only cost a CID each) and repairs the walks;
// every [standing] recompute it draws them afresh.
type standingPart struct {
	v      *standing.View
	acct   *accounting.Service
	window time.Duration
	log    *slog.Logger
	// snap is the view's scores as of the last take: what the hot paths
	// (GossipSub's scoring, sync's peer order) read.
	snap atomic.Pointer[map[string]float64]
	// cosigned holds "pair window" of every co-signed receipt as of the
	// last take: a dispute of such a window was resolved (the labels'
	// policy asks, spec/labels.md).
	cosigned atomic.Pointer[map[string]struct{}]
	// adjust, if set, is what the labels' policy makes of a node's
	// standing (spec/labels.md "Policy"); the services read Of, which
	// applies it, and the labels' policy reads raw, which does not.
	adjust atomic.Pointer[func(did string, s float64) float64]
	// share, if set before start, is given the scores at every take: a
	// front-end holding the mesh role shares them with the others.
	share  func(scores map[string]float64)
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newStandingPart(opts Options, acct *accounting.Service, reg prometheus.Registerer) (*standingPart, error) {
	v, err := standing.NewView(opts.Key.DID(), opts.Config.Standing, standing.NewMetrics(reg), rand.Uint64())
	if err != nil {
		return nil, err
	}
	return &standingPart{v: v, acct: acct, window: opts.Config.Accounting.Window.Duration, log: opts.Log}, nil
}

// take feeds the view what the accounting holds now.
func (sp *standingPart) take() {
	cosigned, disputed, err := sp.acct.Records()
	if err != nil {
		sp.log.Warn("standing: reading receipts", "err", err)
		return
	}
	proofs, err := sp.acct.ForkProofs()
	if err != nil {
		sp.log.Warn("standing: reading fork proofs", "err", err)
		return
	}
	if n, err := sp.v.Take(cosigned, disputed, proofs); n > 0 {
		sp.log.Warn("standing: records refused", "count", n, "first", err)
	}
	sc := sp.v.Scores()
	sp.snap.Store(&sc)
	if sp.share != nil {
		sp.share(sc)
	}
	done := make(map[string]struct{}, len(cosigned))
	for _, r := range cosigned {
		done[windowKey(r)] = struct{}{}
	}
	sp.cosigned.Store(&done)
}

func windowKey(r *receipt.Receipt) string {
	return r.PairKey() + " " + strconv.FormatInt(r.WindowStart, 10)
}

// resolved reports whether a co-signed receipt of the disputed
// receipt's pair and window was held at the last take.
func (sp *standingPart) resolved(d *receipt.Receipt) bool {
	m := sp.cosigned.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[windowKey(d)]
	return ok
}

// Of is a peer's node's standing as of the last take, as the labels'
// policy leaves it (standing.Reader).
func (sp *standingPart) Of(did string) float64 {
	s := sp.raw(did)
	if f := sp.adjust.Load(); f != nil {
		return (*f)(did, s)
	}
	return s
}

// raw is a node's standing as of the last take, whatever its labels.
func (sp *standingPart) raw(did string) float64 {
	if m := sp.snap.Load(); m != nil {
		return (*m)[did]
	}
	return 0
}

// rawReader reads raw as a standing.Reader.
type rawReader struct{ sp *standingPart }

func (r rawReader) Of(did string) float64 { return r.sp.raw(did) }

// score is GossipSub's application score of peer p: its node's standing
// over the trusted threshold, at most 1.
func (sp *standingPart) score(p peer.ID) float64 {
	did, err := identity.DIDFromPeerID(p)
	if err != nil {
		return 0
	}
	t := sp.v.Config().Trusted
	if t <= 0 {
		return min(1, sp.Of(did))
	}
	return min(1, sp.Of(did)/t)
}

func (sp *standingPart) start() {
	ctx, cancel := context.WithCancel(context.Background())
	sp.cancel = cancel
	sp.wg.Add(1)
	go func() {
		defer sp.wg.Done()
		sp.take()
		update := time.NewTicker(max(sp.window, time.Second))
		defer update.Stop()
		full := time.NewTicker(sp.v.Config().Recompute.Duration)
		defer full.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-update.C:
				sp.take()
			case <-full.C:
				sp.v.Recompute(time.Now())
				sp.take()
			}
		}
	}()
}

func (sp *standingPart) close() {
	if sp.cancel != nil {
		sp.cancel()
		sp.wg.Wait()
	}
}

// trusted reports whether peer p's node has standing here: sync and
// lookups ask such peers first.
func (sp *standingPart) trusted(p peer.ID) bool {
	did, err := identity.DIDFromPeerID(p)
	return err == nil && standing.Trusted(sp, did, sp.v.Config().Trusted)
}

// serve answers GET /standing[?of=DID] on the control socket: the view's
// entries as JSON (`fleetmesh standing`). It takes in the newest records
// first, so the answer counts every receipt held when it was asked.
func (sp *standingPart) serve(w http.ResponseWriter, r *http.Request) {
	sp.take()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(sp.v.Entries(r.URL.Query().Get("of")))
}
