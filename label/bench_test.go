package label

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// benchLabellers is how many labellers with standing the benchmark's
// labels come from.
const benchLabellers = 1000

// filledPolicy is a refusing policy holding held labels, from
// benchLabellers labellers with standing, each on its own author, none
// of them an author the benchmark publishes as.
func filledPolicy(b *testing.B, held int) *Policy {
	b.Helper()
	r := mapReader{}
	for i := range benchLabellers {
		r[fmt.Sprintf("did:key:bench%d", i)] = 0.001
	}
	cfg := DefaultConfig()
	cfg.Policy = ActionRefuse
	p, err := NewPolicy(cfg, Options{Standing: r})
	if err != nil {
		b.Fatal(err)
	}
	labellers := make([]string, benchLabellers)
	for i := range labellers {
		labellers[i] = fmt.Sprintf("did:key:bench%d", i)
	}
	for i := range held {
		var id [32]byte
		binary.BigEndian.PutUint64(id[:], uint64(i)+1)
		var pk [32]byte
		binary.BigEndian.PutUint64(pk[:], uint64(i)+1)
		pk[31] = 0xb
		l := &Label{ID: id, Labeller: labellers[i%benchLabellers], Reason: Spam, Target: Target{Author, hexOf(pk)}, Created: t0}
		if _, _, err := p.set.Add(l, true); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// BenchmarkAdmit is the policy's cost per event (Admit, on a kind 1
// event whose author, id and blobs no label names: what nearly every
// event costs) with 0, 10,000 and 1,000,000 labels held.
func BenchmarkAdmit(b *testing.B) {
	sk := nostrKey(b, 77)
	ev := note(b, sk, "hello", []string{"x", fmt.Sprintf("%064x", 5)})
	for _, held := range []int{0, 10_000, 1_000_000} {
		p := filledPolicy(b, held)
		b.Run(fmt.Sprintf("labels=%d", held), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p.Admit(ev) != "" {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkIngest is the relay's ingest of a client's event (signature
// check, policy hooks, durable save) with the labels' policy off and on,
// in the same run, at 0, 10,000 and 1,000,000 labels held. Events are
// signed before the timer and saved by 16 publishers at once, as the
// relay takes a client's pipelined EVENTs.
func BenchmarkIngest(b *testing.B) {
	for _, held := range []int{0, 10_000, 1_000_000} {
		p := filledPolicy(b, held)
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("labels=%d/policy=%v", held, map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
				st, err := store.Open(b.TempDir(), store.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				rl := relay.New(relay.DefaultConfig(), st, nil, nil)
				if on {
					rl.RejectEvent = append(rl.RejectEvent, func(_ context.Context, ev *nostr.Event) string { return p.Admit(ev) })
				}
				sk := nostrKey(b, 78)
				evs := make([]*nostr.Event, b.N)
				for i := range evs {
					evs[i] = &nostr.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: fmt.Sprint("event ", i), Tags: nostr.Tags{}}
					if err := sk.Sign(evs[i]); err != nil {
						b.Fatal(err)
					}
				}
				var next atomic.Int64
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						ev := evs[next.Add(1)-1]
						if _, err := rl.AddEvent(context.Background(), ev, relay.FromClient); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
