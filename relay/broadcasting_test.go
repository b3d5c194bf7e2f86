package relay

import (
	"context"
	"fmt"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

// BenchmarkBroadcast measures matching one stored event against the live
// subscriptions of 64 connections: none match (the cost every event pays
// for every subscription) or all match (the subscription flood's 500
// subscriptions of one address, each delivering the event). Run with
//
//	go test -run '^$' -bench Broadcast -benchtime 500x ./relay/
func BenchmarkBroadcast(b *testing.B) {
	k, _ := nostr.GenerateSecretKey()
	ev := &nostr.Event{CreatedAt: 1, Kind: 1, Tags: nostr.Tags{}, Content: "hello"}
	k.Sign(ev)
	for _, tc := range []struct {
		name   string
		subs   int // per connection
		filter nostr.Filter
	}{
		{"none match, 64x200", 200, nostr.Filter{Kinds: []int{7}}},
		{"none match, 64x8", 8, nostr.Filter{Kinds: []int{7}}},
		{"all match, 64x8", 8, nostr.Filter{Kinds: []int{1}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := New(DefaultConfig(), nil, nil, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range 64 {
				c := &conn{r: r, send: make(chan []byte, 1<<16), subs: map[string]*subscription{}, ctx: ctx, cancel: cancel}
				for i := range tc.subs {
					c.subs[fmt.Sprint("s", i)] = &subscription{filters: []nostr.Filter{tc.filter}}
				}
				r.conns[c] = struct{}{}
				go func() {
					// Owned by the benchmark: ends when ctx does.
					for {
						select {
						case f := <-c.send:
							c.took(f)
						case <-ctx.Done():
							return
						}
					}
				}()
			}
			b.ReportAllocs()
			for b.Loop() {
				r.broadcast(ev)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(64*tc.subs), "ns/sub")
		})
	}
}
