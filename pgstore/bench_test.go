package pgstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/internal/pgtest"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

// benchStore is what the benchmarks call on either store.
type benchStore interface {
	Save(ctx context.Context, ev *nostr.Event) (eventstore.Result, error)
	QueryRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error
	Close() error
}

// benchCorpus makes distinct kind-1 notes and kind-7 reactions by a pool
// of authors, with "e" and "p" tags. Ids are real hashes; the signature
// is filler, since neither store verifies (the relay does).
type benchCorpus struct {
	authors [][32]byte
	rng     *rand.Rand
	ts      int64
}

func newBenchCorpus(nauthors int, seed uint64) *benchCorpus {
	c := &benchCorpus{rng: rand.New(rand.NewPCG(seed, 7)), ts: 1_700_000_000}
	for i := range nauthors {
		var a [32]byte
		binary.BigEndian.PutUint64(a[:], uint64(i)+seed<<32)
		c.authors = append(c.authors, a)
	}
	return c
}

func (c *benchCorpus) next() *nostr.Event {
	r := c.rng
	c.ts += int64(r.IntN(2))
	e := &nostr.Event{PubKey: c.authors[r.IntN(len(c.authors))], CreatedAt: c.ts, Kind: []int{1, 1, 1, 7}[r.IntN(4)], Tags: nostr.Tags{}}
	var ref [32]byte
	binary.BigEndian.PutUint64(ref[:], r.Uint64())
	e.Tags = append(e.Tags, []string{"e", fmt.Sprintf("%x", ref)}, []string{"p", fmt.Sprintf("%x", c.authors[r.IntN(len(c.authors))])})
	e.Content = fmt.Sprintf("note %d with some text to make it the size of a short post", r.Uint64())
	e.ID = e.ComputeID()
	return e
}

// benchStores opens both stores for one benchmark run: the Pebble store
// in a temporary directory, this one on a durable PostgreSQL (fsync on,
// as in production) started for the benchmark.
func benchStores(b *testing.B) map[string]benchStore {
	b.Helper()
	peb, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := pgtest.Start(pgtest.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Stop() })
	ctx := context.Background()
	url, err := srv.CreateDatabase(ctx)
	if err != nil {
		b.Fatal(err)
	}
	pg, err := Open(ctx, url, Options{MaxConns: 16})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pg.Close(); peb.Close() })
	return map[string]benchStore{"pebble": peb, "postgres": pg}
}

// BenchmarkSave saves distinct notes into each store from 8 and from 64
// goroutines per CPU (GOMAXPROCS): ns/op is the wall time per save with
// that many in flight, which is what a relay with many publishers sees.
//
//	go test -run '^$' -bench 'BenchmarkSave|BenchmarkQuery' -benchtime 3000x ./pgstore/
func BenchmarkSave(b *testing.B) {
	stores := benchStores(b)
	for _, par := range []int{8, 64} {
		for _, name := range []string{"pebble", "postgres"} {
			s := stores[name]
			b.Run(fmt.Sprintf("par%d/%s", par, name), func(b *testing.B) {
				c := newBenchCorpus(500, uint64(par))
				evs := make([]*nostr.Event, b.N)
				for i := range evs {
					evs[i] = c.next()
				}
				var next atomic.Int64
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := s.Save(context.Background(), evs[next.Add(1)-1]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkQuery answers the REQ shapes clients send most (an author's
// notes, a home feed of 50 authors, a thread's "#e" and a mention's "#p",
// a kind's newest) with limit 50, on 20,000 stored events.
func BenchmarkQuery(b *testing.B) {
	stores := benchStores(b)
	c := newBenchCorpus(500, 2)
	evs := make([]*nostr.Event, 20_000)
	for i := range evs {
		evs[i] = c.next()
	}
	ctx := context.Background()
	for _, s := range stores {
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 32 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(len(evs)); i = next.Add(1) - 1 {
					if _, err := s.Save(ctx, evs[i]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	filters := map[string]nostr.Filter{
		"author":     {Authors: c.authors[:1], Kinds: []int{1}},
		"feed50":     {Authors: c.authors[:50], Kinds: []int{1}},
		"tag-e":      {Tags: map[string][]string{"e": {evs[9000].Tags[0][1]}}},
		"tag-p":      {Tags: map[string][]string{"p": {fmt.Sprintf("%x", c.authors[7])}}},
		"kind7":      {Kinds: []int{7}},
		"time-range": {Since: evs[10_000].CreatedAt, Until: evs[12_000].CreatedAt, HasUntil: true},
	}
	for fname, f := range filters {
		for name, s := range stores {
			b.Run(fname+"/"+name, func(b *testing.B) {
				start := time.Now()
				n := 0
				for b.Loop() {
					if err := s.QueryRaw(ctx, &f, 50, func(eventstore.Raw) bool { n++; return true }); err != nil {
						b.Fatal(err)
					}
				}
				if n == 0 && time.Since(start) > 0 {
					b.Fatalf("filter %s matched nothing", fname)
				}
			})
		}
	}
}
