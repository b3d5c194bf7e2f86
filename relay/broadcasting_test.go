package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

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
				c := &conn{r: r, send: make(chan outFrame, 1<<16), subs: map[string]*subscription{}, ctx: ctx, cancel: cancel}
				for i := range tc.subs {
					c.subs[fmt.Sprint("s", i)] = &subscription{filters: []nostr.Filter{tc.filter}}
				}
				r.conns[c] = struct{}{}
				r.nconns.Add(1)
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
				r.broadcast(ev, 1, 1)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(64*tc.subs), "ns/sub")
		})
	}
}

// TestLiveAfterOK checks the fan-out's two promises: an event reaches a
// subscription opened before it was stored (even though delivery runs
// after the publisher's OK), and never reaches live a subscription opened
// after its OK, which gets it once, from the store.
func TestLiveAfterOK(t *testing.T) {
	tr := newTestRelay(t, nil)
	k, _ := nostr.GenerateSecretKey()
	pub, sub := tr.dial(), tr.dial()
	sub.send("REQ", "live", map[string]any{"kinds": []int{1}, "limit": 0})
	if m := sub.read(); m[0] != "EOSE" {
		t.Fatalf("got %v, want EOSE", m)
	}
	for i := range 50 {
		ev := signed(t, k, 1, nil, fmt.Sprint("note ", i))
		if ok, msg := pub.publish(ev); !ok {
			t.Fatal(msg)
		}
		// A REQ for it right after its OK, on the publisher's own
		// connection, where the live delivery would land.
		if ids, closed := pub.req(fmt.Sprint("r", i), `{"ids":["`+ev.IDHex()+`"]}`); len(ids) != 1 || closed != "" {
			t.Fatalf("REQ after OK of event %d: %d events (%s), want exactly 1", i, len(ids), closed)
		}
		if m := sub.read(); m[0] != "EVENT" || m[2].(map[string]any)["id"] != ev.IDHex() {
			t.Fatalf("live subscriber got %v, want event %d", m, i)
		}
	}
}

// TestLiveDuringStoredAnswer: a client whose send queue is filled by the
// stored answer to its own REQ, because it reads that answer more slowly
// than the store produces it, is not a slow consumer of live traffic: a
// live event arriving meanwhile waits its turn instead of cutting the
// connection, and the client gets the whole answer, EOSE and the event.
func TestLiveDuringStoredAnswer(t *testing.T) {
	// 250 events of 40 KB are more than the kernel's socket buffers on
	// loopback take, so what the reader has not read stays in the
	// relay's send queue.
	const queue, stored = 16, 250
	tr := newTestRelay(t, func(c *Config) { c.SendQueue = queue })
	k, _ := nostr.GenerateSecretKey()
	content := strings.Repeat("x", 40<<10)
	for i := range stored {
		if _, err := tr.st.Save(context.Background(), signed(t, k, 1, nil, fmt.Sprint(i, content))); err != nil {
			t.Fatal(err)
		}
	}
	reader := tr.dial()
	reader.send("REQ", "all", map[string]any{"kinds": []int{1}, "limit": stored})
	// Wait until the stored answer has filled what the relay queues for
	// the reader (the queue, less the room kept for live events) and the
	// writer is stuck on the full socket: the count stops moving.
	full := int64(storedSlots(queue)) * int64(len(content))
	for last, still := int64(-1), 0; still < 5; {
		time.Sleep(20 * time.Millisecond)
		n := tr.r.buffered.Load()
		if n >= full && n == last {
			still++
		} else {
			still = 0
		}
		last = n
	}
	live := signed(t, k, 1, nil, "published while the answer is queued")
	if ok, msg := tr.dial().publish(live); !ok {
		t.Fatal(msg)
	}
	got, eose, gotLive := 0, false, false
	for !eose || !gotLive {
		reader.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := reader.ws.ReadMessage()
		if err != nil {
			t.Fatalf("after %d stored events (EOSE %v, live %v): %v", got, eose, gotLive, err)
		}
		var m []json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil || len(m) < 2 {
			t.Fatalf("relay sent %.80s", data)
		}
		switch string(m[0]) {
		case `"EVENT"`:
			var ev nostr.Event
			if err := json.Unmarshal(m[2], &ev); err != nil {
				t.Fatal(err)
			}
			if ev.ID == live.ID {
				gotLive = true
			} else if !eose {
				got++
			}
		case `"EOSE"`:
			eose = true
		default:
			t.Fatalf("after %d stored events: %.80s", got, data)
		}
	}
	if got != stored {
		t.Fatalf("got %d stored events before EOSE, want %d", got, stored)
	}
}

// TestFanoutWaitBesideAdd waits for the live-delivery worker while
// events keep being queued, as Shutdown does while the mesh and the
// gateway, which it does not stop, still hand events in. Run under -race:
// the wait must not race with an event starting a new worker (it did when
// the wait was a sync.WaitGroup's, added to from zero).
func TestFanoutWaitBesideAdd(t *testing.T) {
	tr := newTestRelay(t, nil)
	k, _ := nostr.GenerateSecretKey()
	ev := signed(t, k, 1, nil, "hello")
	for range 8 {
		f := newFanout(tr.r)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 20000 {
				f.add(ev, 0, nil)
			}
		}()
		for waiting := true; waiting; {
			f.wait()
			select {
			case <-done:
				waiting = false
			default:
			}
		}
		f.wait()
		f.mu.Lock()
		running, queued := f.running, len(f.queue)
		f.mu.Unlock()
		if running || queued > 0 {
			t.Fatalf("wait returned with a worker running (%v) or %d events queued", running, queued)
		}
	}
}
