package descriptor

import (
	"container/heap"
	"fmt"
	"sync"
	"time"
)

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Limits are the descriptor limits (DefaultLimits if zero).
	Limits Limits
	// MaxDIDs bounds how many DIDs the replay table remembers.
	MaxDIDs int
	// Now is the clock (time.Now if nil); tests set it.
	Now func() time.Time
}

// DefaultMaxDIDs is the replay table bound used when VerifierConfig.MaxDIDs
// is zero.
const DefaultMaxDIDs = 65536

// Verifier verifies descriptors and refuses replays: it remembers, per DID,
// the highest sequence number it accepted and the expiry of that descriptor,
// and refuses any descriptor whose sequence number is not higher.
//
// The table holds at most MaxDIDs entries. An entry is dropped once its
// descriptor has expired, and when the table is full the entry expiring
// soonest makes room. Dropping an entry forgets that DID's sequence number,
// so a replay of an older descriptor of that DID that is itself still
// unexpired would be accepted; older descriptors normally expire before
// newer ones, which is why the soonest-expiring entry is the one dropped.
// A Verifier is safe for concurrent use.
type Verifier struct {
	lim     Limits
	maxDIDs int
	now     func() time.Time

	mu     sync.Mutex
	byDID  map[string]*seen
	expiry expiryHeap
}

type seen struct {
	did   string
	seq   uint64
	exp   int64
	index int
}

// NewVerifier returns a Verifier with an empty replay table.
func NewVerifier(cfg VerifierConfig) *Verifier {
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	if cfg.MaxDIDs <= 0 {
		cfg.MaxDIDs = DefaultMaxDIDs
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Verifier{lim: cfg.Limits, maxDIDs: cfg.MaxDIDs, now: cfg.Now, byDID: make(map[string]*seen)}
}

// Accept verifies raw at the current time and, if its sequence number is
// higher than any this Verifier accepted for the DID, records it and returns
// the descriptor. Otherwise it returns ErrReplayed (or the verification
// error) and records nothing.
func (v *Verifier) Accept(raw []byte) (*Signed, error) {
	now := v.now()
	s, err := Verify(raw, now, v.lim)
	if err != nil {
		return nil, err
	}
	d := &s.Descriptor
	v.mu.Lock()
	defer v.mu.Unlock()
	v.dropExpired(now.Unix())
	if e, ok := v.byDID[d.DID]; ok {
		if d.Seq <= e.seq {
			return nil, fmt.Errorf("descriptor: %s: seq %d, already accepted seq %d: %w", d.DID, d.Seq, e.seq, ErrReplayed)
		}
		e.seq, e.exp = d.Seq, d.Expires
		heap.Fix(&v.expiry, e.index)
		return s, nil
	}
	if len(v.byDID) >= v.maxDIDs {
		old := heap.Pop(&v.expiry).(*seen)
		delete(v.byDID, old.did)
	}
	e := &seen{did: d.DID, seq: d.Seq, exp: d.Expires}
	heap.Push(&v.expiry, e)
	v.byDID[d.DID] = e
	return s, nil
}

// LastSeq returns the highest sequence number accepted for did, if the table
// still remembers it.
func (v *Verifier) LastSeq(did string) (uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byDID[did]
	if !ok {
		return 0, false
	}
	return e.seq, true
}

// Len returns how many DIDs the replay table remembers.
func (v *Verifier) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.byDID)
}

func (v *Verifier) dropExpired(now int64) {
	for len(v.expiry) > 0 && v.expiry[0].exp <= now {
		old := heap.Pop(&v.expiry).(*seen)
		delete(v.byDID, old.did)
	}
}

// expiryHeap orders remembered DIDs by the expiry of their descriptor,
// soonest first (container/heap.Interface).
type expiryHeap []*seen

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].exp < h[j].exp }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*seen)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
