package negentropy

import (
	"fmt"
	"slices"
)

// Storage is a set of items sorted by (timestamp, id), addressed by index.
// The reconciler asks only for what an ordered store can answer by position:
// how many items, the items of an index range in order, where a bound falls,
// and the fingerprint of an index range. Two implementations are meant to
// exist: Vector here (items loaded in memory, as strfry does for NEG-OPEN)
// and the relay's persistent store (a counted tree that can answer by index
// and keep per-node sums, see Accumulator.Merge). The set must not change
// while a reconciliation uses it.
type Storage interface {
	// Size is the number of items.
	Size() int
	// Iterate calls fn with each item of [begin, end) and its index, in
	// order, until fn returns false.
	Iterate(begin, end int, fn func(index int, it Item) bool) error
	// LowerBound returns the first index in [begin, end) whose item is not
	// below b, or end if there is none.
	LowerBound(begin, end int, b Bound) (int, error)
	// Fingerprint returns the fingerprint of the items in [begin, end).
	Fingerprint(begin, end int) (Fingerprint, error)
}

// Vector is a Storage held in memory as a sorted slice.
type Vector struct {
	items []Item
}

// NewVector sorts items in place and keeps the slice (the caller must not
// change it afterwards). It rejects an item with the reserved Infinity
// timestamp and the same (timestamp, id) twice.
func NewVector(items []Item) (*Vector, error) {
	slices.SortFunc(items, Item.Compare)
	for i, it := range items {
		if it.Timestamp == Infinity {
			return nil, fmt.Errorf("negentropy: item %s has the reserved timestamp 2^64-1", it.ID)
		}
		if i > 0 && items[i-1] == it {
			return nil, fmt.Errorf("negentropy: duplicate item %d/%s", it.Timestamp, it.ID)
		}
	}
	return &Vector{items: items}, nil
}

// Size is the number of items.
func (v *Vector) Size() int { return len(v.items) }

func (v *Vector) check(begin, end int) error {
	if begin < 0 || begin > end || end > len(v.items) {
		return fmt.Errorf("%w: range [%d, %d) outside [0, %d)", ErrStorage, begin, end, len(v.items))
	}
	return nil
}

// Iterate calls fn for each item of [begin, end) in order until it returns
// false.
func (v *Vector) Iterate(begin, end int, fn func(int, Item) bool) error {
	if err := v.check(begin, end); err != nil {
		return err
	}
	for i := begin; i < end; i++ {
		if !fn(i, v.items[i]) {
			break
		}
	}
	return nil
}

// LowerBound binary-searches [begin, end) for the first item not below b.
func (v *Vector) LowerBound(begin, end int, b Bound) (int, error) {
	if err := v.check(begin, end); err != nil {
		return 0, err
	}
	i, _ := slices.BinarySearchFunc(v.items[begin:end], b, func(it Item, b Bound) int {
		return b.CompareItem(it)
	})
	return begin + i, nil
}

// Fingerprint sums the ids of [begin, end).
func (v *Vector) Fingerprint(begin, end int) (Fingerprint, error) {
	if err := v.check(begin, end); err != nil {
		return Fingerprint{}, err
	}
	var acc Accumulator
	for _, it := range v.items[begin:end] {
		acc.Add(it.ID)
	}
	return acc.Fingerprint(uint64(end - begin)), nil
}
