package mesh

import (
	"slices"
	"testing"
)

// TestSubscriptionReasons runs one node through a sequence of changes to
// the three reasons to subscribe (its own filters, its clients' interest
// and durability) and checks after each that it is subscribed to exactly
// the shards at least one reason needs: a reason that drops a shard
// leaves it only when no other reason holds it.
func TestSubscriptionReasons(t *testing.T) {
	_, nodes := newMockMesh(t, 1, func(int, []*testNode) Config { return testConfig() }, func(int) Hooks { return Hooks{} })
	m := nodes[0].m
	steps := []struct {
		name    string
		do      func() error
		want    []int
		durable []int
	}{
		{"own filters", func() error { return m.Subscribe(1, 2) }, []int{1, 2}, nil},
		{"interest overlaps own", func() error { return m.SetInterest([]int{2, 3}) }, []int{1, 2, 3}, nil},
		{"durable overlaps both", func() error { return m.setDurable([]int{3, 4}) }, []int{1, 2, 3, 4}, []int{3, 4}},
		{"interest drops a shard durability keeps", func() error { return m.SetInterest([]int{2}) }, []int{1, 2, 3, 4}, []int{3, 4}},
		{"durability drops it too", func() error { return m.setDurable([]int{4}) }, []int{1, 2, 4}, []int{4}},
		{"own drops a shard interest keeps", func() error { m.Unsubscribe(2); return nil }, []int{1, 2, 4}, []int{4}},
		{"interest empties", func() error { return m.SetInterest(nil) }, []int{1, 4}, []int{4}},
		{"durability moves", func() error { return m.setDurable([]int{1, 5}) }, []int{1, 5}, []int{1, 5}},
		{"own leaves a durable shard", func() error { m.Unsubscribe(1); return nil }, []int{1, 5}, []int{1, 5}},
		{"durability empties", func() error { return m.setDurable(nil) }, nil, nil},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := m.Subscribed(); !slices.Equal(got, st.want) && len(got)+len(st.want) > 0 {
			t.Fatalf("%s: subscribed to %v, want %v", st.name, got, st.want)
		}
		if got := m.Durable(); !slices.Equal(got, st.durable) && len(got)+len(st.durable) > 0 {
			t.Fatalf("%s: durable %v, want %v", st.name, got, st.durable)
		}
	}
	if err := m.SetInterest([]int{ShardCount}); err == nil {
		t.Fatalf("interest in shard %d accepted", ShardCount)
	}
}
