package label

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// synthetic is a label by labeller on target number n, with a distinct
// id: the set judges bounds, not signatures.
func synthetic(i int, labeller string, n int) *Label {
	var id [32]byte
	binary.BigEndian.PutUint64(id[:], uint64(i)+1)
	copy(id[8:], labeller)
	return &Label{ID: id, Labeller: labeller, Reason: Spam, Target: Target{Author, fmt.Sprintf("%064x", n)}, Created: t0}
}

// TestSetBounds: a flood from one labeller stops at its bound; a flood
// from many fresh labellers fills the set to its total bound and then
// only replaces its own oldest, never a trusted label; a trusted label
// finds room in a set full of untrusted ones; a set full of trusted
// labels refuses. The set never holds more than its bound.
func TestSetBounds(t *testing.T) {
	const perLabeller, total = 50, 1_000
	s := NewSet(perLabeller, total)
	check := func(when string) {
		t.Helper()
		if all, _ := s.Len(); all > total {
			t.Fatalf("%s: %d labels held, bound %d", when, all, total)
		}
	}
	// One labeller floods.
	refused := 0
	for i := range 10_000 {
		_, _, err := s.Add(synthetic(i, "did:key:flooder", i), false)
		if errors.Is(err, ErrLabellerFull) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if s.Of("did:key:flooder") != perLabeller || refused != 10_000-perLabeller {
		t.Fatalf("one labeller holds %d (refused %d), want %d", s.Of("did:key:flooder"), refused, perLabeller)
	}
	check("one labeller's flood")
	// Three trusted labellers label a spammer.
	for j := range 3 {
		if _, _, err := s.Add(synthetic(j, fmt.Sprintf("did:key:honest%d", j), 7), true); err != nil {
			t.Fatal(err)
		}
	}
	// A hundred thousand fresh labellers flood, one label each.
	evicted := 0
	for i := range 100_000 {
		_, ev, err := s.Add(synthetic(i, fmt.Sprintf("did:key:sybil%d", i), i), false)
		if err != nil {
			t.Fatal(err)
		}
		if ev != nil {
			evicted++
		}
	}
	check("many labellers' flood")
	all, trusted := s.Len()
	if all != total || trusted != 3 {
		t.Fatalf("after the flood %d held, %d trusted; want %d and 3", all, trusted, total)
	}
	if n := len(s.On(fmt.Sprintf("p:%064x", 7), t0)); n < 3 {
		t.Fatalf("the trusted labels of the spammer were pushed out: %d left", n)
	}
	if evicted == 0 || s.Of("did:key:flooder") != 0 {
		t.Fatalf("evicted %d; the oldest (the first flooder's %d) should have gone first", evicted, s.Of("did:key:flooder"))
	}
	// A set full of trusted labels refuses, trusted or not.
	full := NewSet(total, 10)
	for i := range 10 {
		if _, _, err := full.Add(synthetic(i, "did:key:t", i), true); err != nil {
			t.Fatal(err)
		}
	}
	for _, trusted := range []bool{false, true} {
		if _, _, err := full.Add(synthetic(99, "did:key:u", 99), trusted); !errors.Is(err, ErrFull) {
			t.Fatalf("trusted %v: %v, want ErrFull", trusted, err)
		}
		if err := full.Room("did:key:u", trusted); !errors.Is(err, ErrFull) {
			t.Fatalf("room, trusted %v: %v, want ErrFull", trusted, err)
		}
	}
}

// TestSetExpire: expired labels are not read and are dropped by Expire.
func TestSetExpire(t *testing.T) {
	s := NewSet(10, 10)
	a, b := synthetic(1, "did:key:a", 1), synthetic(2, "did:key:b", 1)
	a.Expires = t0 + 10
	s.Add(a, true)
	s.Add(b, true)
	target := fmt.Sprintf("p:%064x", 1)
	if n := len(s.On(target, t0+9)); n != 2 {
		t.Fatalf("%d labels before expiry", n)
	}
	if n := len(s.On(target, t0+10)); n != 1 {
		t.Fatalf("%d labels read at expiry, want 1", n)
	}
	if n := s.Expire(t0 + 10); n != 1 || s.Has(a.ID) || !s.Has(b.ID) {
		t.Fatalf("expired %d", n)
	}
}
