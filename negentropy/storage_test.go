package negentropy

import (
	"errors"
	"testing"
)

func TestNewVector(t *testing.T) {
	if _, err := NewVector([]Item{{Timestamp: 1, ID: idOf(1)}, {Timestamp: 1, ID: idOf(1)}}); err == nil {
		t.Error("duplicate item accepted")
	}
	if _, err := NewVector([]Item{{Timestamp: Infinity, ID: idOf(1)}}); err == nil {
		t.Error("item with the infinity timestamp accepted")
	}
	v, err := NewVector([]Item{
		{Timestamp: 7, ID: idOf(1)},
		{Timestamp: 3, ID: idOf(9)},
		{Timestamp: 7, ID: idOf(0)},
		{Timestamp: 3, ID: idOf(2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var order []Item
	if err := v.Iterate(0, v.Size(), func(i int, it Item) bool {
		if i != len(order) {
			t.Errorf("index %d passed as %d", len(order), i)
		}
		order = append(order, it)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []Item{{3, idOf(2)}, {3, idOf(9)}, {7, idOf(0)}, {7, idOf(1)}}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("item %d = %v, want %v", i, order[i], want[i])
		}
	}
}

func TestVectorLowerBound(t *testing.T) {
	v, err := NewVector([]Item{
		{Timestamp: 3, ID: ID{0x10}},
		{Timestamp: 3, ID: ID{0x20}},
		{Timestamp: 5, ID: ID{0x10}},
		{Timestamp: 9, ID: ID{0x00}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		begin, end int
		b          Bound
		want       int
	}{
		{"zero bound", 0, 4, Bound{}, 0},
		{"timestamp only", 0, 4, Bound{Timestamp: 3}, 0},
		{"between ids at one timestamp", 0, 4, Bound{Timestamp: 3, ID: ID{0x15}, PrefixLen: 1}, 1},
		{"exactly an item", 0, 4, Bound{Timestamp: 3, ID: ID{0x20}, PrefixLen: 1}, 1},
		{"after the last id of a timestamp", 0, 4, Bound{Timestamp: 3, ID: ID{0x21}, PrefixLen: 1}, 2},
		{"zero id at a timestamp", 0, 4, Bound{Timestamp: 9}, 3},
		{"infinity", 0, 4, infinityBound, 4},
		{"search starts at begin", 2, 4, Bound{}, 2},
		{"search stops at end", 0, 2, infinityBound, 2},
	}
	for _, c := range cases {
		got, err := v.LowerBound(c.begin, c.end, c.b)
		if err != nil || got != c.want {
			t.Errorf("%s: LowerBound = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}

func TestVectorRangeErrors(t *testing.T) {
	v, err := NewVector([]Item{{Timestamp: 1, ID: idOf(1)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{-1, 1}, {1, 0}, {0, 2}} {
		if _, err := v.Fingerprint(r[0], r[1]); !errors.Is(err, ErrStorage) {
			t.Errorf("Fingerprint%v: %v", r, err)
		}
		if _, err := v.LowerBound(r[0], r[1], Bound{}); !errors.Is(err, ErrStorage) {
			t.Errorf("LowerBound%v: %v", r, err)
		}
		if err := v.Iterate(r[0], r[1], func(int, Item) bool { return true }); !errors.Is(err, ErrStorage) {
			t.Errorf("Iterate%v: %v", r, err)
		}
	}
}

func TestMinimalBound(t *testing.T) {
	cases := []struct {
		prev, next Item
		want       Bound
	}{
		{Item{1, idOf(9)}, Item{2, idOf(0)}, Bound{Timestamp: 2}},
		{Item{2, ID{0x10, 0x20}}, Item{2, ID{0x10, 0x30}}, Bound{Timestamp: 2, ID: ID{0x10, 0x30}, PrefixLen: 2}},
		{Item{2, ID{31: 1}}, Item{2, ID{31: 2}}, Bound{Timestamp: 2, ID: ID{31: 2}, PrefixLen: 32}},
	}
	for _, c := range cases {
		got := minimalBound(c.prev, c.next)
		if got != c.want {
			t.Errorf("minimalBound(%v, %v) = %+v, want %+v", c.prev, c.next, got, c.want)
		}
		if got.CompareItem(c.prev) >= 0 || got.CompareItem(c.next) < 0 {
			t.Errorf("bound %+v does not separate %v from %v", got, c.prev, c.next)
		}
	}
}
