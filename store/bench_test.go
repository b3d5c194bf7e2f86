package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// benchCorpus makes realistic, distinct events: kind-1 notes, reactions and
// reposts from a pool of authors, with "e" and "p" tags pointing at each
// other. The ids are real (the hash of the serialization); the signature is
// 64 bytes of filler, because the store never verifies (the relay does, and
// its cost is measured by nostr.BenchmarkVerify) and signing a large corpus
// would make the set-up, not the store, the slow part.
type benchCorpus struct {
	authors [][32]byte
	rng     *rand.Rand
	ts      int64
}

func newBenchCorpus(b *testing.B, nauthors int, seed uint64) *benchCorpus {
	b.Helper()
	c := &benchCorpus{rng: rand.New(rand.NewPCG(seed, 7)), ts: 1_700_000_000}
	for range nauthors {
		k, err := nostr.GenerateSecretKey()
		if err != nil {
			b.Fatal(err)
		}
		c.authors = append(c.authors, k.PubKey())
	}
	return c
}

func (c *benchCorpus) next() *nostr.Event {
	r := c.rng
	c.ts += int64(r.IntN(3))
	e := &nostr.Event{
		PubKey:    c.authors[r.IntN(len(c.authors))],
		CreatedAt: c.ts,
		Kind:      []int{1, 1, 1, 1, 7, 7, 6}[r.IntN(7)],
		Tags:      nostr.Tags{},
	}
	var ref [32]byte
	binary.BigEndian.PutUint64(ref[:], r.Uint64())
	if e.Kind != 1 || r.IntN(2) == 0 {
		e.Tags = append(e.Tags, []string{"e", fmt.Sprintf("%x", ref), "wss://relay.example.org"})
	}
	if e.Kind != 1 || r.IntN(3) == 0 {
		e.Tags = append(e.Tags, []string{"p", fmt.Sprintf("%x", c.authors[r.IntN(len(c.authors))])})
	}
	switch e.Kind {
	case 1:
		e.Content = fmt.Sprintf("note %d: a short text of the length most notes have, give or take a few words.", r.Uint32())
	case 7:
		e.Content = "+"
	}
	e.ID = e.ComputeID()
	for i := range e.Sig {
		e.Sig[i] = byte(r.Uint32())
	}
	return e
}

// take returns the corpus's next n events.
func (c *benchCorpus) take(n int) []*nostr.Event {
	evs := make([]*nostr.Event, n)
	for i := range evs {
		evs[i] = c.next()
	}
	return evs
}

// cpuTime is the CPU time the whole process (Pebble's goroutines too) has
// used; per operation it is steadier than wall time on a shared machine.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchOpen(b *testing.B, opts Options) *Store {
	b.Helper()
	opts.SweepEvery = time.Hour
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// saveAll saves events from many goroutines, as the relay's connections do.
func saveAll(b *testing.B, s *Store, evs []*nostr.Event, savers int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, savers)
	for range savers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(evs) {
					return
				}
				if res, err := s.Save(context.Background(), evs[i]); err != nil || res != Stored {
					errs <- fmt.Errorf("save %d: %v %v", i, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkSave measures durable saves (each one acknowledged only after its
// batch's fsync) from 64 concurrent savers into an empty store.
func BenchmarkSave(b *testing.B) {
	benchSave(b, benchOpen(b, Options{}), newBenchCorpus(b, 500, 1))
}

// BenchmarkSaveIntoFull measures durable saves into a store that already
// holds 300,000 events, nearly all in tables on disk (small memtables, as
// in BenchmarkQuery): each new event's duplicate and tombstone checks are
// point reads that miss, which in an empty store cost nothing.
func BenchmarkSaveIntoFull(b *testing.B) {
	const stored = 300_000
	s := benchOpen(b, Options{MemTableBytes: 1 << 20})
	c := newBenchCorpus(b, 1000, 5)
	saveAll(b, s, c.take(stored), 64)
	benchSave(b, s, c)
}

// benchSave times b.N saves of c's next events into s from 64 savers and
// reports events/s and process CPU per save.
func benchSave(b *testing.B, s *Store, c *benchCorpus) {
	evs := c.take(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	saveAll(b, s, evs, 64)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkQuery runs the filter shapes clients send most on a store of
// 100,000 events, filled once for all sub-benchmarks. Its memtables are
// made small so that, as in a store of millions of events, nearly all of
// it is in tables on disk (and the OS page cache) rather than in memory.
func BenchmarkQuery(b *testing.B) {
	const stored = 100_000
	s := benchOpen(b, Options{MemTableBytes: 1 << 20})
	c := newBenchCorpus(b, 1000, 2)
	evs := c.take(stored)
	saveAll(b, s, evs, 64)
	r := rand.New(rand.NewPCG(3, 4))
	pick := func() *nostr.Event { return evs[r.IntN(len(evs))] }

	shapes := []struct {
		name   string
		filter func() nostr.Filter
		limit  int
	}{
		{"authors+kinds/limit20", func() nostr.Filter {
			f := nostr.Filter{Kinds: []int{1, 6}}
			for range 10 {
				f.Authors = append(f.Authors, pick().PubKey)
			}
			return f
		}, 20},
		{"kind/limit100", func() nostr.Filter { return nostr.Filter{Kinds: []int{1}} }, 100},
		{"tag-p/limit100", func() nostr.Filter {
			return nostr.Filter{Tags: map[string][]string{"p": {fmt.Sprintf("%x", pick().PubKey)}}}
		}, 100},
		{"ids/20", func() nostr.Filter {
			var f nostr.Filter
			for range 20 {
				f.IDs = append(f.IDs, pick().ID)
			}
			return f
		}, 20},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			filters := make([]nostr.Filter, 256)
			for i := range filters {
				filters[i] = sh.filter()
			}
			b.ReportAllocs()
			i, got := 0, 0
			cpu := cpuTime(b)
			for b.Loop() {
				f := &filters[i%len(filters)]
				i++
				if err := s.Query(context.Background(), f, sh.limit, func(*nostr.Event) bool {
					got++
					return true
				}); err != nil {
					b.Fatal(err)
				}
			}
			if got == 0 {
				b.Fatal("no query returned anything")
			}
			b.ReportMetric(float64(got)/float64(i), "events/op")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(i), "cpu-µs/op")
		})
	}
}

// BenchmarkQueryStored runs the relay bench's REQ shapes (docs/benchmarks/
// relay.md) against a store a bench run filled, so that a profile of Query
// sees a million events as the node holds them: FLEETMESH_BENCH_STORE names
// the store directory (a copy: Open writes to it), for example the
// `store` dir of the node home `relaybench --keep` leaves. Without it the
// benchmark is skipped. Authors, ids and tag values are sampled from the
// store itself.
func BenchmarkQueryStored(b *testing.B) {
	dir := os.Getenv("FLEETMESH_BENCH_STORE")
	if dir == "" {
		b.Skip("FLEETMESH_BENCH_STORE is not set")
	}
	s, err := Open(dir, Options{SweepEvery: time.Hour, MaxScan: 10_000_000})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// Sample every 97th event of the newest 200,000 and every 997th of the
	// rest: authors, ids, e-tag targets and the time span.
	var sample []*nostr.Event
	var minTS, maxTS int64
	n := 0
	if err := s.Query(context.Background(), &nostr.Filter{}, 1<<30, func(ev *nostr.Event) bool {
		if n < 200_000 && n%97 == 0 || n%997 == 0 {
			sample = append(sample, ev)
		}
		if n == 0 {
			maxTS = ev.CreatedAt
		}
		minTS = ev.CreatedAt
		n++
		return true
	}); err != nil {
		b.Fatal(err)
	}
	if len(sample) < 100 {
		b.Fatalf("store %s holds too few events (%d)", dir, n)
	}
	r := rand.New(rand.NewPCG(5, 6))
	pick := func() *nostr.Event { return sample[r.IntN(len(sample))] }
	tagOf := func(name string) string {
		for {
			ev := pick()
			for _, t := range ev.Tags {
				if len(t) >= 2 && t[0] == name {
					return t[1]
				}
			}
		}
	}
	shapes := []struct {
		name   string
		filter func() nostr.Filter
	}{
		{"ids", func() nostr.Filter {
			var f nostr.Filter
			for range 1 + r.IntN(10) {
				f.IDs = append(f.IDs, pick().ID)
			}
			return f
		}},
		{"author_kinds", func() nostr.Filter {
			return nostr.Filter{Authors: [][32]byte{pick().PubKey}, Kinds: []int{1, 6}, Limit: 20}
		}},
		{"feed_authors", func() nostr.Filter {
			f := nostr.Filter{Kinds: []int{1, 6, 30023}, Limit: 50}
			for range 50 {
				f.Authors = append(f.Authors, pick().PubKey)
			}
			return f
		}},
		{"kind_limit", func() nostr.Filter {
			return nostr.Filter{Kinds: []int{[]int{1, 7, 30023}[r.IntN(3)]}, Limit: 100}
		}},
		{"tag_e", func() nostr.Filter {
			return nostr.Filter{Tags: map[string][]string{"e": {tagOf("e")}}, Kinds: []int{1, 7}, Limit: 500}
		}},
		{"tag_p", func() nostr.Filter {
			return nostr.Filter{Tags: map[string][]string{"p": {tagOf("p")}}, Kinds: []int{1, 7}, Limit: 100}
		}},
		{"tag_t", func() nostr.Filter {
			return nostr.Filter{Tags: map[string][]string{"t": {tagOf("t")}}, Kinds: []int{1}, Limit: 50}
		}},
		{"created_window", func() nostr.Filter {
			since := minTS + r.Int64N(max(maxTS-minTS-3600, 1))
			return nostr.Filter{Since: since, Until: since + 3600, HasUntil: true, Limit: 500}
		}},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			filters := make([]nostr.Filter, 512)
			for i := range filters {
				filters[i] = sh.filter()
				filters[i].HasLimit = filters[i].Limit > 0
			}
			b.ReportAllocs()
			i, got := 0, 0
			cpu := cpuTime(b)
			for b.Loop() {
				f := &filters[i%len(filters)]
				i++
				limit := f.Limit
				if !f.HasLimit {
					limit = 500
				}
				if err := s.Query(context.Background(), f, limit, func(*nostr.Event) bool {
					got++
					return true
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(got)/float64(i), "events/op")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(i), "cpu-µs/op")
		})
	}
}
