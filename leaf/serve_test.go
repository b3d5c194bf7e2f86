package leaf

import (
	"fmt"
	"testing"
	"time"
)

// TestServeCachedEvents: events the leaf holds and its home lacks are
// served only while the app allows it (SetServe), at most
// Config.ServeBytes a wake; the next wake serves the rest, and then
// nothing.
func TestServeCachedEvents(t *testing.T) {
	h, _, l := pairedLeaf(t, nil)
	theirs := signedEvents(t, 5, time.Now().Unix()-200, 5)
	h.save(t, theirs)
	cached := signedEvents(t, 12, time.Now().Unix()-100, 12)
	cached = append(cached, signedEvents(t, 1, time.Now().Unix()-100, 1)...) // another author: outside the subscription
	if _, err := l.db.putEvents(cached, l.rankFunc(), l.cfg.MaxStoreBytes, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Subscribe(fmt.Sprintf(`{"authors":[%q,%q]}`, theirs[0].PubKeyHex(), cached[0].PubKeyHex())); err != nil {
		t.Fatal(err)
	}
	if s := mustSync(t, l); !s.CaughtUp || s.EventsFetched != 5 || s.EventsServed != 0 {
		t.Fatalf("wake with serving off: %s", s.JSON())
	}
	if h.holds(t, cached[:1]) {
		t.Fatal("the home has a cached event the leaf was not allowed to serve")
	}
	l.SetServe(true)
	l.cfg.ServeBytes = int64(7 * len(cached[0].AppendJSON(nil)))
	for i, want := range []int64{7, 5, 0} {
		if s := mustSync(t, l); !s.CaughtUp || s.EventsServed != want || s.EventsFetched != 0 {
			t.Fatalf("serving wake %d: %s, want %d served", i, s.JSON(), want)
		}
	}
	if !h.holds(t, cached[:12]) {
		t.Fatal("the home lacks served events")
	}
	if h.holds(t, cached[12:]) {
		t.Fatal("the leaf served an event outside its subscriptions")
	}
}
