package leaf

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fleetmesh.org/fleetmesh/netem"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// newTestLeaf opens a leaf in a temporary directory, paired with h at
// addr and subscribed to filter.
func newTestLeaf(t testing.TB, h *testHome, addr, filter string) (*Leaf, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := New(NewConfig(dir), NewFileKeyStore(dir+"/leaf.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Pair(h.invitation(addr)); err != nil {
		t.Fatal(err)
	}
	if filter != "" {
		if err := l.Subscribe(filter); err != nil {
			t.Fatal(err)
		}
	}
	return l, dir
}

func mustSync(t testing.TB, l *Leaf) *Summary {
	t.Helper()
	s, err := l.Sync(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wake: %s", s.JSON())
	return s
}

// storedMessageIDs returns the DIDComm ids of the stored messages.
func storedMessageIDs(t testing.TB, l *Leaf) []string {
	t.Helper()
	var ids []string
	after := int64(0)
	for {
		raw, err := l.Messages(after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var ms []message
		if err := json.Unmarshal(raw, &ms); err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if m.Error != "" {
				t.Fatalf("message %s could not be opened: %s", m.DeliveryID, m.Error)
			}
			ids = append(ids, m.ID)
			after = m.Seq
		}
	}
	slices.Sort(ids)
	return ids
}

// loadedWake sets up a home with queued messages and events the leaf
// misses, behind an impairing proxy, and returns the leaf and what it
// must end with.
type loadedWake struct {
	home    *testHome
	proxy   *netem.Proxy
	leaf    *Leaf
	dir     string
	queued  []string
	events  []*nostr.Event
	missing int
}

func setupLoaded(t testing.TB, messages, events, missing int, imp netem.Config, home func(*relay.Config)) *loadedWake {
	t.Helper()
	h := newTestHome(t, home)
	p, err := netem.New(h.addr, netem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	t0 := time.Now()
	evs := signedEvents(t, events, time.Now().Unix()-int64(events)-10, missing)
	t.Logf("signed %d events in %s", events, time.Since(t0))
	author := evs[0].PubKeyHex()
	filter := fmt.Sprintf(`{"authors":[%q],"kinds":[1]}`, author)
	l, dir := newTestLeaf(t, h, p.Addr(), filter)
	t.Cleanup(func() { l.Close() })
	// First wake, unimpaired: pairing (mediation) and an empty catch-up.
	if s := mustSync(t, l); !s.CaughtUp {
		t.Fatalf("pairing wake: %+v", s)
	}
	t0 = time.Now()
	h.save(t, evs)
	t.Logf("home stored them in %s", time.Since(t0))
	// The leaf holds all but missing of them already.
	have := evs[:events-missing]
	if _, err := l.db.putEvents(have, l.rankFunc(), l.cfg.MaxStoreBytes, nil); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	queued := h.queue(t, newSender(t), l.DID(), messages)
	t.Logf("queued %d messages in %s", messages, time.Since(t0))
	slices.Sort(queued)
	p.SetConfig(imp)
	return &loadedWake{home: h, proxy: p, leaf: l, dir: dir, queued: queued, events: evs, missing: missing}
}

// TestLoadedWakeImpaired is the loaded wake: 150 ms RTT, 1 %
// loss, 500 queued DIDComm messages and 200 of 10,000 events missing.
// One wake picks up everything and catches up within the budget.
func TestLoadedWakeImpaired(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	w := setupLoaded(t, 500, 10_000, 200, netem.Config{Latency: 75 * time.Millisecond, Loss: 0.01}, nil)
	s := mustSync(t, w.leaf)
	if s.Cancelled || !s.CaughtUp || s.Error != "" {
		t.Fatalf("wake did not finish within its budget: %s", s.JSON())
	}
	if s.PickedUp != 500 || s.EventsFetched != 200 || s.Method != "negentropy" {
		t.Fatalf("picked up %d (want 500), fetched %d (want 200) by %q", s.PickedUp, s.EventsFetched, s.Method)
	}
	if got := storedMessageIDs(t, w.leaf); !slices.Equal(got, w.queued) {
		t.Fatalf("stored %d messages, queued %d: sets differ", len(got), len(w.queued))
	}
	raw, err := w.leaf.Query(fmt.Sprintf(`{"authors":[%q],"limit":20000}`, w.events[0].PubKeyHex()))
	if err != nil {
		t.Fatal(err)
	}
	var got []json.RawMessage
	if err := json.Unmarshal(raw, &got); err != nil || len(got) != 10_000 {
		t.Fatalf("local store holds %d events (err %v), want 10000", len(got), err)
	}
	w.leaf.Close()
	w.proxy.Close()
	w.home.stop()
}

// TestWakeBandwidthCapped: a loaded wake over a slow link (150 ms RTT and
// 128 KiB/s each way, shared by every connection, as a phone on a weak
// cell would have) picks up and catches up everything within its budget.
func TestWakeBandwidthCapped(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const capped = 128 << 10
	w := setupLoaded(t, 60, 500, 60, netem.Config{Latency: 75 * time.Millisecond, Bandwidth: capped}, nil)
	before := w.proxy.Stats().Down
	s := mustSync(t, w.leaf)
	if s.Cancelled || !s.CaughtUp || s.PickedUp != 60 || s.EventsFetched != 60 {
		t.Fatalf("capped wake: %s", s.JSON())
	}
	if got := storedMessageIDs(t, w.leaf); !slices.Equal(got, w.queued) {
		t.Fatalf("stored %d messages, queued %d: sets differ", len(got), len(w.queued))
	}
	// The cap held: what came down the link took at least its time.
	if down := w.proxy.Stats().Down - before; s.DurationMs < down*1000/capped {
		t.Fatalf("%d bytes came down in %d ms, faster than the cap", down, s.DurationMs)
	}
	w.leaf.Close()
	w.proxy.Close()
	w.home.stop()
}

// TestSyncReturnsOnCancelLoaded: a loaded wake over the impaired path
// (150 ms RTT, 1 % loss), cancelled in the middle of its pickup, returns
// within 2 s of the cancel with what it did, and the next wake finishes
// the work.
func TestSyncReturnsOnCancelLoaded(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	w := setupLoaded(t, 80, 300, 30, impaired, nil)
	w.leaf.cfg.DeliveryBatch = 20
	ctx := NewContext()
	var cancelled atomic.Int64
	w.leaf.SetProgress(progressFunc(func(stage string, done, _ int64) {
		if stage == "pickup" && done >= 40 && cancelled.Load() == 0 {
			cancelled.Store(time.Now().UnixNano())
			ctx.Cancel()
		}
	}))
	s, err := w.leaf.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Load() == 0 {
		t.Fatalf("the wake ended before the cancel: %s", s.JSON())
	}
	if d := time.Since(time.Unix(0, cancelled.Load())); d > 2*time.Second || !s.Cancelled || s.CaughtUp {
		t.Fatalf("returned %s after cancel: %s", d, s.JSON())
	}
	t.Logf("returned %s after cancel: %s", time.Since(time.Unix(0, cancelled.Load())), s.JSON())
	w.leaf.SetProgress(nil)
	for i := 0; i < 3; i++ {
		if s := mustSync(t, w.leaf); s.CaughtUp {
			break
		}
	}
	if got := storedMessageIDs(t, w.leaf); !slices.Equal(got, w.queued) {
		t.Fatalf("stored %d messages, queued %d: sets differ", len(got), len(w.queued))
	}
	w.leaf.Close()
	w.proxy.Close()
	w.home.stop()
}
