package label

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
)

// Errors Set.Add refuses a label with.
var (
	// ErrLabellerFull: the labeller holds MaxPerLabeller labels here.
	ErrLabellerFull = errors.New("labeller at its bound")
	// ErrFull: the set holds MaxLabels labels and none it may evict.
	ErrFull = errors.New("label storage full")
)

// Set holds the labels a node knows of, bounded per labeller and in
// total, and indexes them by target (spec/labels.md "Storage"). A label
// is kept in one of two tiers by its labeller's standing here when it
// arrived: trusted (at least the policy's min_standing) or not. When the set
// is full, a new label evicts the oldest untrusted one; a trusted label is
// never evicted by another, so a flood of labels from fresh identities
// cannot push out the labels that count. Its methods are safe for
// concurrent use.
type Set struct {
	maxPerLabeller, maxLabels int

	mu       sync.RWMutex
	byID     map[[32]byte]*held
	byTarget map[string][]*held
	per      map[string]int
	// tiers[0] is untrusted labels, tiers[1] trusted, oldest first.
	tiers [2]*list.List
}

// held is one label in the set.
type held struct {
	l    *Label
	tier int
	at   *list.Element
}

// NewSet makes an empty set with the given bounds (both at least 1).
func NewSet(maxPerLabeller, maxLabels int) *Set {
	return &Set{maxPerLabeller: maxPerLabeller, maxLabels: maxLabels, byID: map[[32]byte]*held{},
		byTarget: map[string][]*held{}, per: map[string]int{}, tiers: [2]*list.List{list.New(), list.New()}}
}

// Has reports whether the label id is held.
func (s *Set) Has(id [32]byte) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.byID[id]
	return ok
}

// Room reports whether Add would take a label of labeller, trusted or
// not, without adding it: the relay asks before it stores a label event,
// so that the store holds no more labels than the set.
func (s *Set) Room(labeller string, trusted bool) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.room(labeller, trusted)
}

func (s *Set) room(labeller string, trusted bool) error {
	if s.per[labeller] >= s.maxPerLabeller {
		return fmt.Errorf("%w: %s holds %d labels here, the most one labeller may (max_per_labeller)", ErrLabellerFull, labeller, s.maxPerLabeller)
	}
	if len(s.byID) >= s.maxLabels && s.tiers[0].Len() == 0 {
		return fmt.Errorf("%w: %d labels held, all from labellers with standing (max_labels)", ErrFull, s.maxLabels)
	}
	return nil
}

// Add keeps l, in the trusted tier if trusted. When the set is full it
// evicts the oldest untrusted label and returns its id, so that the
// caller can drop it from the event store too. A label held already is
// not added again (added false, no error).
func (s *Set) Add(l *Label, trusted bool) (added bool, evicted *[32]byte, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[l.ID]; ok {
		return false, nil, nil
	}
	if err := s.room(l.Labeller, trusted); err != nil {
		return false, nil, err
	}
	if len(s.byID) >= s.maxLabels {
		old := s.tiers[0].Front().Value.(*held)
		s.remove(old)
		evicted = &old.l.ID
	}
	tier := 0
	if trusted {
		tier = 1
	}
	h := &held{l: l, tier: tier}
	h.at = s.tiers[tier].PushBack(h)
	s.byID[l.ID] = h
	k := l.Target.String()
	s.byTarget[k] = append(s.byTarget[k], h)
	s.per[l.Labeller]++
	return true, evicted, nil
}

// remove drops h (mu held).
func (s *Set) remove(h *held) {
	s.tiers[h.tier].Remove(h.at)
	delete(s.byID, h.l.ID)
	k := h.l.Target.String()
	hs := s.byTarget[k]
	for i, x := range hs {
		if x == h {
			hs[i] = hs[len(hs)-1]
			hs = hs[:len(hs)-1]
			break
		}
	}
	if len(hs) == 0 {
		delete(s.byTarget, k)
	} else {
		s.byTarget[k] = hs
	}
	if s.per[h.l.Labeller]--; s.per[h.l.Labeller] <= 0 {
		delete(s.per, h.l.Labeller)
	}
}

// Retract drops the labels ids that pubkey published (NIP-09: a
// deletion takes effect only on its author's events) and returns how
// many it dropped.
func (s *Set) Retract(pubkey [32]byte, ids [][32]byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if h, ok := s.byID[id]; ok && h.l.PubKey == pubkey {
			s.remove(h)
			n++
		}
	}
	return n
}

// Expire drops every label whose expiration is at or before now (Unix
// seconds) and returns how many.
func (s *Set) Expire(now int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.byID {
		if h.l.Expires != 0 && h.l.Expires <= now {
			s.remove(h)
			n++
		}
	}
	return n
}

// On returns the labels held about target that have not expired by now
// (Unix seconds). The labels are shared: callers must not change them.
func (s *Set) On(target string, now int64) []*Label {
	s.mu.RLock()
	defer s.mu.RUnlock()
	hs := s.byTarget[target]
	if len(hs) == 0 {
		return nil
	}
	out := make([]*Label, 0, len(hs))
	for _, h := range hs {
		if h.l.Expires == 0 || h.l.Expires > now {
			out = append(out, h.l)
		}
	}
	return out
}

// each calls fn for the labels held about target, unexpired at now,
// under the read lock: the policy's hot path, which allocates nothing.
func (s *Set) each(target []byte, now int64, fn func(*Label)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, h := range s.byTarget[string(target)] {
		if h.l.Expires == 0 || h.l.Expires > now {
			fn(h.l)
		}
	}
}

// Len returns how many labels are held in all, and of them how many in
// the trusted tier.
func (s *Set) Len() (all, trusted int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byID), s.tiers[1].Len()
}

// Of returns how many labels labeller has here.
func (s *Set) Of(labeller string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.per[labeller]
}
