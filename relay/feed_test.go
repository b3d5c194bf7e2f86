package relay

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

// TestFeedDelivery runs a relay as a front-end over a shared store: stored
// events reach live subscriptions only through Deliver, in feed order, a
// subscription whose stored answer had an event is not given it again,
// and the OnStored hooks run at delivery with the origin the event was
// accepted with (FromFrontEnd for another front-end's).
func TestFeedDelivery(t *testing.T) {
	tr, head := feedRelay(t, false)
	r, st := tr.r, tr.st
	type hooked struct {
		id   [32]byte
		from Origin
	}
	hooks := make(chan hooked, 8)
	r.OnStored = append(r.OnStored, func(ev *nostr.Event, from Origin) { hooks <- hooked{ev.ID, from} })

	k, _ := nostr.GenerateSecretKey()
	// Another front-end stored a at position 1; this one has not yet
	// followed the feed that far.
	a := signed(t, k, 1, nil, "from another front-end")
	if _, err := st.Save(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	head.Store(1)

	sub := tr.dial()
	ids, closed := sub.req("s", `{"kinds":[1]}`)
	if closed != "" || len(ids) != 1 || ids[0] != a.IDHex() {
		t.Fatalf("stored answer %v (closed %q), want [%s]", ids, closed, a.IDHex())
	}
	pub := tr.dial()
	b := signed(t, k, 1, nil, "published here")
	if ok, msg := pub.publish(b); !ok {
		t.Fatalf("publish: %s", msg)
	}
	head.Store(2)
	r.Deliver(a, 1)
	r.Deliver(b, 2)
	// The subscription's stored answer had a: the next event it is given
	// is b, once.
	for {
		m := sub.read()
		if m[0] != "EVENT" {
			continue
		}
		if got := m[2].(map[string]any)["id"]; got != b.IDHex() {
			t.Fatalf("live event %v, want only %s (a was in the stored answer)", got, b.IDHex())
		}
		break
	}
	want := map[[32]byte]Origin{a.ID: FromFrontEnd, b.ID: FromClient}
	for range 2 {
		select {
		case h := <-hooks:
			if w, ok := want[h.id]; !ok || w != h.from {
				t.Fatalf("OnStored %x from %d, want %v", h.id[:4], h.from, want)
			}
			delete(want, h.id)
		case <-time.After(10 * time.Second):
			t.Fatalf("OnStored hooks not run for %d events", len(want))
		}
	}
	// Past the position its EOSE saw, the subscription forgets its stored
	// answer: a third event reaches it as any live event does.
	c := signed(t, k, 1, nil, "third")
	if ok, msg := pub.publish(c); !ok {
		t.Fatalf("publish: %s", msg)
	}
	r.Deliver(c, 3)
	for {
		m := sub.read()
		if m[0] == "EVENT" {
			if got := m[2].(map[string]any)["id"]; got != c.IDHex() {
				t.Fatalf("live event %v, want %s", got, c.IDHex())
			}
			return
		}
	}
}

// feedRelay serves a relay as a front-end over a store whose feed head
// the test sets (head): the store answers each query with that head too
// when withHead is set (headStore), as pgstore does.
func feedRelay(t *testing.T, withHead bool) (*testRelay, *atomic.Uint64) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EventsPerSecond, cfg.IPEventsPerSecond = 0, 0
	head := new(atomic.Uint64)
	var s Store = st
	if withHead {
		s = headStore{st, head}
	}
	r := New(cfg, s, nil, nil)
	r.FeedHead = func(context.Context) (uint64, error) { return head.Load(), nil }
	srv := startServer(r, (*Relay).Listener, false)
	tr := &testRelay{t: t, r: r, st: st, srv: srv, url: "ws" + srv.URL[len("http"):], dialer: websocket.DefaultDialer}
	t.Cleanup(func() {
		r.Shutdown(context.Background())
		srv.Close()
		st.Close()
	})
	return tr, head
}

// headStore is a store.Store that answers QueryRawHead with a feed head
// the test sets, as a shared store reads it in the query's snapshot.
type headStore struct {
	*store.Store
	head *atomic.Uint64
}

func (h headStore) QueryRawHead(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) (uint64, error) {
	head := h.head.Load()
	return head, h.QueryRaw(ctx, f, limit, fn)
}

// TestFeedLateEventsNotLive: a front-end whose feed lags behind the store
// answers a REQ with limit 1 from the store (the newest event), then its
// feed brings the older events its stored part left out: they are not
// given live, before or after EOSE, as one relay would not; the next new
// event is.
func TestFeedLateEventsNotLive(t *testing.T) {
	tr, head := feedRelay(t, true)
	r, st := tr.r, tr.st
	k, _ := nostr.GenerateSecretKey()
	var old []*nostr.Event
	for i := range 3 {
		ev := signed(t, k, 1, nil, fmt.Sprint("stored by another front-end ", i))
		ev.CreatedAt -= int64(100 - i)
		if err := k.Sign(ev); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Save(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		old = append(old, ev)
	}
	head.Store(3)
	sub := tr.dial()
	ids, closed := sub.req("s", `{"kinds":[1],"limit":1}`)
	if closed != "" || len(ids) != 1 || ids[0] != old[2].IDHex() {
		t.Fatalf("stored answer %v (closed %q), want the newest, %s", ids, closed, old[2].IDHex())
	}
	// The feed reaches this front-end only now.
	for i, ev := range old {
		r.Deliver(ev, uint64(i+1))
	}
	fresh := signed(t, k, 1, nil, "new")
	if _, err := st.Save(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	head.Store(4)
	r.Deliver(fresh, 4)
	for {
		m := sub.read()
		if m[0] != "EVENT" {
			continue
		}
		if got := m[2].(map[string]any)["id"]; got != fresh.IDHex() {
			t.Fatalf("live event %v, want only the new %s: the older ones were in the store when the REQ read it", got, fresh.IDHex())
		}
		return
	}
}
