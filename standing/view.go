package standing

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/receipt"
)

// View is one node's standing of every node it holds verified receipts
// of, from its own point of view. Its methods are safe for concurrent
// use; it satisfies Reader.
type View struct {
	mu   sync.Mutex
	cfg  Config
	self string
	m    *Metrics

	ids  map[string]int32
	dids []string
	info []nodeInfo
	g    graph
	wall []bool
	w    *walks

	seen      map[string]struct{} // CIDs of receipts taken in
	baseEpoch int64               // edge weights are relative to it
	nowEpoch  int64               // the newest epoch seen

	scores   []float64
	through  []float64
	stale    bool
	computed time.Time
	rngSeed  uint64
}

// nodeInfo is what the reasons of one node's standing are made of.
type nodeInfo struct {
	windows        map[int64]struct{} // windows with a verified co-signed receipt
	counterparties map[int32]struct{}
	disputes       []int64 // epochs of windows this node reported disputed with it
	forks          int     // fork proofs naming it
	lastWindow     int64
}

// NewView makes the view of the node self. m, if not nil, counts what
// it does; rngSeed seeds the walks (a node uses a random one; tests
// a fixed one).
func NewView(self string, cfg Config, m *Metrics, rngSeed uint64) (*View, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("standing: %w", err)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	v := &View{cfg: cfg, self: self, m: m, ids: map[string]int32{}, seen: map[string]struct{}{},
		baseEpoch: math.MinInt64, rngSeed: rngSeed}
	v.id(self)
	v.w = newWalks(&v.g, 0, cfg.Alpha, cfg.MaxSteps, v.wall, rngSeed)
	return v, nil
}

func (v *View) id(did string) int32 {
	if i, ok := v.ids[did]; ok {
		return i
	}
	i := int32(len(v.dids))
	v.ids[did] = i
	v.dids = append(v.dids, did)
	v.info = append(v.info, nodeInfo{windows: map[int64]struct{}{}, counterparties: map[int32]struct{}{}})
	v.wall = append(v.wall, false)
	v.g.grow(len(v.dids))
	if v.w != nil {
		v.w.wall = v.wall
		v.w.grow(len(v.dids))
	}
	return i
}

// Units is the service a receipt records one side giving the other: the
// figures both sides agree on (the smaller of what the giver says it gave
// and the receiver says it received), as bytes: event, storage and
// circuit bytes, and 1 KiB for each mediated message and compute unit
// (spec/standing.md "Weights").
func Units(gave, received receipt.Counts) float64 {
	f := func(a, b uint64) float64 { return float64(min(a, b)) }
	return f(gave.Bytes, received.Bytes) + f(gave.StorageBytes, received.StorageBytes) +
		f(gave.CircuitBytes, received.CircuitBytes) +
		1024*(f(gave.MediationMessages, received.MediationMessages)+f(gave.ComputeUnits, received.ComputeUnits))
}

func (v *View) epochOf(windowStart int64) int64 {
	return windowStart / int64(v.cfg.Epoch.Seconds())
}

// decayed converts units served in epoch e to this view's relative
// weight: units x (1/EpochDecay)^(e - base), so newer service weighs more
// and the walks' step probabilities do not change as time passes.
func (v *View) decayed(units float64, e int64) float64 {
	if v.baseEpoch == math.MinInt64 {
		v.baseEpoch = e
	}
	return units * math.Pow(v.cfg.EpochDecay, float64(v.baseEpoch-e))
}

// AddReceipt takes in one receipt: a co-signed one that verifies and
// whose settlement is null adds the service it records to the graph
// and repairs the walks it affects; a disputed one signed by this node
// makes its counterparty a wall; anything else is refused with an error.
// A receipt taken in before is ignored.
func (v *View) AddReceipt(r *receipt.Receipt) error {
	c, err := r.CID()
	if err != nil {
		return fmt.Errorf("standing: %w", err)
	}
	k := c.KeyString()
	if r.Disputed {
		k += "d"
	}
	v.mu.Lock()
	_, dup := v.seen[k]
	v.mu.Unlock()
	if dup {
		return nil
	}
	if err := r.Verify(); err != nil {
		v.m.receipts.WithLabelValues("refused").Inc()
		return fmt.Errorf("standing: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, dup := v.seen[k]; dup {
		return nil
	}
	if r.Disputed {
		var other string
		switch {
		case r.A == v.self && r.SigA != nil:
			other = r.B
		case r.B == v.self && r.SigB != nil:
			other = r.A
		default:
			v.m.receipts.WithLabelValues("ignored").Inc()
			return nil // another node's word against a third: not evidence here
		}
		v.seen[k] = struct{}{}
		o := v.id(other)
		e := v.epochOf(r.WindowStart)
		v.info[o].disputes = append(v.info[o].disputes, e)
		v.nowEpoch = max(v.nowEpoch, e)
		if e > v.nowEpoch-int64(v.cfg.DisputeEpochs) && !v.wall[o] {
			v.wallOff(o)
		}
		v.m.receipts.WithLabelValues("disputed").Inc()
		return nil
	}
	v.seen[k] = struct{}{}
	a, b := v.id(r.A), v.id(r.B)
	e := v.epochOf(r.WindowStart)
	v.nowEpoch = max(v.nowEpoch, e)
	for _, x := range []int32{a, b} {
		v.info[x].windows[r.WindowStart] = struct{}{}
		v.info[x].lastWindow = max(v.info[x].lastWindow, r.WindowStart)
	}
	v.info[a].counterparties[b] = struct{}{}
	v.info[b].counterparties[a] = struct{}{}
	// B received what A gave: B's walks may step to A, and back.
	v.addService(b, a, Units(r.CountsA.Gave, r.CountsB.Received), e)
	v.addService(a, b, Units(r.CountsB.Gave, r.CountsA.Received), e)
	v.m.receipts.WithLabelValues("counted").Inc()
	return nil
}

// addService adds units served to u by x in epoch e, repairing walks.
func (v *View) addService(u, x int32, units float64, e int64) {
	if units <= 0 {
		return
	}
	w := v.decayed(units, e)
	total := v.g.add(u, x, w)
	if v.w.paths != nil {
		start := time.Now()
		n := v.w.edgeAdded(u, x, w, total)
		v.m.updates.Inc()
		v.m.repaired.Add(float64(n))
		v.m.updateSeconds.Observe(time.Since(start).Seconds())
	}
	v.stale = true
}

// wallOff makes node o a wall: walks stop before it.
func (v *View) wallOff(o int32) {
	v.wall[o] = true
	if v.w.paths != nil {
		v.m.repaired.Add(float64(v.w.walled(o)))
	}
	v.stale = true
}

// Take takes in what a node's accounting holds: co-signed receipts,
// the disputed receipts it reported, and fork proofs. Receipts taken
// before cost a CID each; it returns how many records were refused and
// the first refusal.
func (v *View) Take(cosigned, disputed []*receipt.Receipt, proofs []*receipt.ForkProof) (refused int, first error) {
	note := func(err error) {
		if err != nil {
			refused++
			if first == nil {
				first = err
			}
		}
	}
	for _, r := range cosigned {
		note(v.AddReceipt(r))
	}
	for _, r := range disputed {
		note(v.AddReceipt(r))
	}
	for _, p := range proofs {
		note(v.AddForkProof(p))
	}
	return refused, first
}

// Config returns the view's settings.
func (v *View) Config() Config { return v.cfg }

// AddForkProof takes in a fork proof: it verifies with no trust in
// whoever sent it, and both parties, who both signed both receipts, are
// walls with standing zero from then on.
func (v *View) AddForkProof(p *receipt.ForkProof) error {
	x, _, err := p.Verify()
	if err != nil {
		return fmt.Errorf("standing: %w", err)
	}
	id, _ := p.ID()
	v.mu.Lock()
	defer v.mu.Unlock()
	k := "fork " + id.KeyString()
	if _, dup := v.seen[k]; dup {
		return nil
	}
	v.seen[k] = struct{}{}
	for _, did := range []string{x.A, x.B} {
		if did == v.self {
			continue
		}
		o := v.id(did)
		v.info[o].forks++
		if !v.wall[o] {
			v.wallOff(o)
		}
	}
	v.m.forks.Inc()
	return nil
}

// Recompute draws every walk afresh at time now: disputes older than
// DisputeEpochs stop being walls, edges whose decayed service fell
// below MinUnits are dropped, and weights are rebased to now's epoch.
func (v *View) Recompute(now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.recompute(now)
}

func (v *View) recompute(now time.Time) {
	start := time.Now()
	ne := max(v.nowEpoch, v.epochOf(now.Unix()))
	v.nowEpoch = ne
	if v.baseEpoch != math.MinInt64 {
		v.g.scale(math.Pow(v.cfg.EpochDecay, float64(ne-v.baseEpoch)))
		v.baseEpoch = ne
		v.g.prune(v.cfg.MinUnits)
	}
	for i := range v.info {
		fresh := false
		for _, e := range v.info[i].disputes {
			fresh = fresh || e > ne-int64(v.cfg.DisputeEpochs)
		}
		v.wall[i] = v.info[i].forks > 0 || fresh
	}
	v.w.wall = v.wall
	v.rngSeed++
	v.w.generate(v.cfg.Walks, v.rngSeed)
	v.score()
	v.m.recomputations.Inc()
	took := time.Since(start).Seconds()
	v.m.recomputeSeconds.Observe(took)
	v.m.lastRecompute.Set(took)
	v.m.nodes.Set(float64(len(v.dids)))
}

// score refreshes the scores from the walks (mu held).
func (v *View) score() {
	v.through = make([]float64, len(v.dids))
	v.scores = v.w.scores(v.cfg.Beta, v.through)
	v.stale = false
	v.computed = time.Now()
}

// current returns fresh scores, rescoring the repaired walks if any
// receipt arrived since (mu held); before the first Recompute it draws
// the walks.
func (v *View) current() {
	if v.w.paths == nil {
		v.recompute(time.Now())
		return
	}
	if v.stale {
		v.score()
	}
}

// Of returns did's standing here: from 0 (none) to 1.
func (v *View) Of(did string) float64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.current()
	i, ok := v.ids[did]
	if !ok || int(i) >= len(v.scores) {
		return 0
	}
	return v.scores[i]
}

// Scores returns every node's standing (the node itself left out), a
// snapshot for hot paths that cannot wait for a rescoring. A node taken
// in since the last scoring by a record that changed no score (a receipt
// without service, an old dispute) has 0, as Of says.
func (v *View) Scores() map[string]float64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.current()
	out := make(map[string]float64, len(v.dids))
	for i, d := range v.dids {
		if i == 0 {
			continue
		}
		if i < len(v.scores) {
			out[d] = v.scores[i]
		} else {
			out[d] = 0
		}
	}
	return out
}

// Entry is one node's standing and its reasons.
type Entry struct {
	DID      string  `json:"did"`
	Standing float64 `json:"standing"`
	// VerifiedWindows counts the windows with a co-signed receipt of it
	// that verified here; Counterparties the distinct nodes of those.
	VerifiedWindows int `json:"verified_windows"`
	Counterparties  int `json:"counterparties"`
	// TrustedCounterparties are those whose own standing here is at
	// least Config.Trusted.
	TrustedCounterparties int `json:"trusted_counterparties"`
	// Disputes counts windows this node reported disputed with it;
	// ForkProofs the fork proofs naming it; Wall whether walks stop
	// before it.
	Disputes   int  `json:"disputes"`
	ForkProofs int  `json:"fork_proofs"`
	Wall       bool `json:"wall"`
	// Bottleneck is the largest share of the walks reaching it that
	// passed one other node first.
	Bottleneck float64 `json:"bottleneck"`
	// LastWindow is the start of its newest verified window (Unix
	// seconds); Computed when the walks were last scored.
	LastWindow int64     `json:"last_window"`
	Computed   time.Time `json:"computed"`
	// Anchor says whether its verified history supports the anchor class
	// (spec/standing.md "Anchors").
	Anchor bool `json:"anchor"`
}

// Entries returns every node's standing with reasons, highest first (the
// node itself left out); did, if not "", selects one node.
func (v *View) Entries(did string) []Entry {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.current()
	out := []Entry{}
	for i, d := range v.dids {
		if i == 0 || (did != "" && d != did) {
			continue
		}
		in := v.info[i]
		e := Entry{DID: d, Standing: v.scores[i], VerifiedWindows: len(in.windows),
			Counterparties: len(in.counterparties), Disputes: len(in.disputes), ForkProofs: in.forks,
			Wall: v.wall[i], Bottleneck: v.through[i], LastWindow: in.lastWindow, Computed: v.computed}
		for c := range in.counterparties {
			if c == 0 || v.scores[c] >= v.cfg.Trusted {
				e.TrustedCounterparties++
			}
		}
		e.Anchor = v.anchor(int32(i))
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Standing > out[j].Standing })
	return out
}

// anchor reports whether node i has AnchorWindows verified windows with
// counterparties of standing (this node, or trusted here), and standing
// itself.
func (v *View) anchor(i int32) bool {
	if v.scores[i] < v.cfg.Trusted || v.wall[i] {
		return false
	}
	windows := map[int64]struct{}{}
	for c := range v.info[i].counterparties {
		if c != 0 && v.scores[c] < v.cfg.Trusted {
			continue
		}
		for w := range v.info[c].windows {
			if _, ok := v.info[i].windows[w]; ok {
				windows[w] = struct{}{}
			}
		}
	}
	return len(windows) >= v.cfg.AnchorWindows
}
