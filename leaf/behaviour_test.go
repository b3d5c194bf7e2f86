package leaf

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/netem"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// pairedLeaf is a leaf paired (mediation granted) with a home behind a
// proxy that passes traffic unchanged until the test says otherwise.
func pairedLeaf(t testing.TB, cfg func(*relay.Config)) (*testHome, *netem.Proxy, *Leaf) {
	t.Helper()
	h := newTestHome(t, cfg)
	p, err := netem.New(h.addr, netem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	l, _ := newTestLeaf(t, h, p.Addr(), "")
	t.Cleanup(func() { l.Close() })
	if s := mustSync(t, l); !s.CaughtUp {
		t.Fatalf("pairing wake: %s", s.JSON())
	}
	return h, p, l
}

// TestSyncReturnsOnCancel: with every path silent (blackholed), a
// cancelled wake returns within the 2 s the profile promises, with a
// summary, and leaves no goroutine behind.
func TestSyncReturnsOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h, p, l := pairedLeaf(t, nil)
	h.queue(t, newSender(t), l.DID(), 5)
	p.Blackhole()
	ctx := NewContext()
	type result struct {
		s   *Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := l.Sync(ctx)
		done <- result{s, err}
	}()
	time.Sleep(300 * time.Millisecond) // the wake is waiting on silent sockets
	ctx.Cancel()
	cancelled := time.Now()
	select {
	case r := <-done:
		if r.err != nil || !r.s.Cancelled || r.s.CaughtUp {
			t.Fatalf("cancelled wake: %v %+v", r.err, r.s)
		}
		t.Logf("returned %s after cancel: %s", time.Since(cancelled), r.s.JSON())
	case <-time.After(2 * time.Second):
		t.Fatal("Sync did not return within 2 s of cancel")
	}
	l.Close()
	p.Close()
	h.stop()
}

// TestBlackholeThenRestore: a wake whose connections were blackholed
// ends at its budget; after the path is restored, the next wake's first
// pickup succeeds at once, on new connections, with no exchange waiting
// for a stale socket.
func TestBlackholeThenRestore(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h, p, l := pairedLeaf(t, nil)
	s := newSender(t)
	queued := h.queue(t, s, l.DID(), 20)
	l.cfg.BudgetMs = 3000
	p.Blackhole()
	if sum := mustSync(t, l); sum.CaughtUp || sum.PickedUp != 0 {
		t.Fatalf("wake through a blackhole: %s", sum.JSON())
	}
	p.Restore()
	queued = append(queued, h.queue(t, s, l.DID(), 20)...)
	slices.Sort(queued)
	l.cfg.BudgetMs = DefaultBudgetMs
	before := p.Stats().Conns
	sum := mustSync(t, l)
	if !sum.CaughtUp || sum.PickedUp != 40 || sum.Stalls != 0 {
		t.Fatalf("wake after restore: %s", sum.JSON())
	}
	// A wake that waited on a stale socket would have its first pickup
	// after exchangeTimeout at least; on new connections it comes
	// within one dial's time.
	if sum.FirstPickupMs < 0 || sum.FirstPickupMs >= dialTimeout.Milliseconds() {
		t.Fatalf("first pickup after %d ms: not within one dial's timeout (%s) of the wake's start", sum.FirstPickupMs, dialTimeout)
	}
	if got := p.Stats().Conns - before; got != sum.Connections || got == 0 {
		t.Fatalf("proxy saw %d new connections, the leaf dialed %d", got, sum.Connections)
	}
	if got := storedMessageIDs(t, l); !slices.Equal(got, queued) {
		t.Fatalf("stored %d messages, queued %d", len(got), len(queued))
	}
	l.Close()
	p.Close()
	h.stop()
}

// progressFunc adapts a function to Progress.
type progressFunc func(stage string, done, total int64)

func (f progressFunc) OnProgress(stage string, done, total int64) { f(stage, done, total) }

// TestHomeRestartMidWake: the home node stops during pickup and comes
// back on the same address; the wake (or the next) finishes, nothing is
// lost and nothing is stored twice, and the outbox reaches the home.
func TestHomeRestartMidWake(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h, p, l := pairedLeaf(t, nil)
	queued := h.queue(t, newSender(t), l.DID(), 300)
	slices.Sort(queued)
	evs := signedEvents(t, 10, time.Now().Unix()-100, 10)
	for _, ev := range evs {
		if err := l.Publish(ev.AppendJSON(nil)); err != nil {
			t.Fatal(err)
		}
	}
	p.SetConfig(netem.Config{Latency: 20 * time.Millisecond})
	l.cfg.DeliveryBatch = 20
	var once sync.Once
	restarted := make(chan struct{})
	l.SetProgress(progressFunc(func(stage string, done, _ int64) {
		if stage == "pickup" && done >= 60 {
			once.Do(func() {
				go func() {
					h.stop()
					h.start()
					close(restarted)
				}()
			})
		}
	}))
	for i := 0; i < 3; i++ {
		if s := mustSync(t, l); s.CaughtUp {
			break
		}
	}
	<-restarted
	if s := mustSync(t, l); !s.CaughtUp || s.PickedUp != 0 {
		t.Fatalf("wake after the restart's: %s", s.JSON())
	}
	if got := storedMessageIDs(t, l); !slices.Equal(got, queued) {
		t.Fatalf("stored %d distinct messages, queued %d", len(got), len(queued))
	}
	raw, _ := l.Outbox()
	if string(raw) != "[]" {
		t.Fatalf("outbox still holds %s", raw)
	}
	for _, ev := range evs {
		n := 0
		f := nostr.Filter{IDs: [][32]byte{ev.ID}}
		if err := h.st.Query(t.Context(), &f, 1, func(*nostr.Event) bool { n++; return true }); err != nil || n != 1 {
			t.Fatalf("home lacks published event %s (%v)", ev.IDHex(), err)
		}
	}
	l.Close()
	p.Close()
	h.stop()
}

// TestSinceFallback: a relay that answers NEG-OPEN with NEG-ERR (here:
// the filter covers more than its NIP-77 bound) is caught up with since
// windows, page by page, to the same result.
func TestSinceFallback(t *testing.T) {
	h, _, l := pairedLeaf(t, func(c *relay.Config) { c.MaxNegRecords = 10 })
	evs := signedEvents(t, 700, time.Now().Unix()-2000, 700)
	h.save(t, evs)
	if err := l.Subscribe(fmt.Sprintf(`{"authors":[%q]}`, evs[0].PubKeyHex())); err != nil {
		t.Fatal(err)
	}
	s := mustSync(t, l)
	if !s.CaughtUp || s.Method != "since" || s.EventsFetched != 700 {
		t.Fatalf("since catch-up: %s", s.JSON())
	}
	st, _ := l.db.loadState()
	if len(st.Subs) != 1 || len(st.Subs[0].Pending) != 0 || st.Subs[0].Covered == 0 {
		t.Fatalf("subscription state after the walk: %+v", st.Subs)
	}
	if s := mustSync(t, l); !s.CaughtUp || s.EventsFetched != 0 {
		t.Fatalf("second since catch-up fetched again: %s", s.JSON())
	}
}

// TestEvictionBoundsTheStore: a store bounded below its subscription's
// size keeps the newest events (EvictOldest), and the next wake does not
// fetch the evicted ones again.
func TestEvictionBoundsTheStore(t *testing.T) {
	h, _, l := pairedLeaf(t, nil)
	evs := signedEvents(t, 150, time.Now().Unix()-1000, 150)
	h.save(t, evs)
	size := len(evs[0].AppendJSON(nil))
	l.cfg.MaxStoreBytes = int64(50 * size)
	if err := l.Subscribe(fmt.Sprintf(`{"authors":[%q]}`, evs[0].PubKeyHex())); err != nil {
		t.Fatal(err)
	}
	if s := mustSync(t, l); !s.CaughtUp {
		t.Fatal(s.JSON())
	}
	if n, _ := l.StoreBytes(); n > l.cfg.MaxStoreBytes {
		t.Fatalf("store holds %d bytes, bound %d", n, l.cfg.MaxStoreBytes)
	}
	raw, _ := l.Query(fmt.Sprintf(`{"authors":[%q],"limit":1000}`, evs[0].PubKeyHex()))
	var kept []nostr.Event
	if err := json.Unmarshal(raw, &kept); err != nil || len(kept) != 50 {
		t.Fatalf("kept %d events (%v), want the 50 that fit", len(kept), err)
	}
	if kept[len(kept)-1].CreatedAt != evs[100].CreatedAt {
		t.Fatalf("oldest kept is %d, want %d (the oldest are evicted first)", kept[len(kept)-1].CreatedAt, evs[100].CreatedAt)
	}
	if s := mustSync(t, l); s.EventsFetched != 0 {
		t.Fatalf("the next wake fetched evicted events again: %s", s.JSON())
	}
}

// TestPushWake: the endpoint the leaf set is registered with its home,
// which POSTs a wake carrying nothing but its type when a message is
// queued.
func TestPushWake(t *testing.T) {
	got := make(chan []byte, 4)
	push := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		w.WriteHeader(http.StatusCreated)
	}))
	defer push.Close()
	h, _, l := pairedLeaf(t, nil)
	if err := l.SetPushEndpoint(push.URL + "/up/leaf1"); err != nil {
		t.Fatal(err)
	}
	if s := mustSync(t, l); !s.CaughtUp {
		t.Fatal(s.JSON())
	}
	h.queue(t, newSender(t), l.DID(), 1)
	select {
	case b := <-got:
		want, _ := json.Marshal(mediation.PushWakeBody{Type: mediation.TypePushWake})
		if string(b) != string(want) {
			t.Fatalf("push body %s, want %s and nothing else", b, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no push wake after a message was queued")
	}
	if s := mustSync(t, l); s.PickedUp != 1 {
		t.Fatalf("woken leaf picked up %d", s.PickedUp)
	}
}

// TestSendMessageThroughHome: a message written offline is forwarded
// through the home's mediator to another leaf it mediates, and leaves the
// outbox only once the mediator took it.
func TestSendMessageThroughHome(t *testing.T) {
	h, p, a := pairedLeaf(t, nil)
	b, _ := newTestLeaf(t, h, p.Addr(), "")
	defer b.Close()
	if s := mustSync(t, b); !s.CaughtUp {
		t.Fatal(s.JSON())
	}
	id, err := a.SendMessage(b.DID(), []byte(`{"type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := mustSync(t, a); s.OutboxSent != 1 || s.OutboxLeft != 0 {
		t.Fatalf("sender's wake: %s", s.JSON())
	}
	if s := mustSync(t, b); s.PickedUp != 1 {
		t.Fatalf("recipient's wake: %s", s.JSON())
	}
	raw, _ := b.Messages(0, 10)
	var ms []message
	if err := json.Unmarshal(raw, &ms); err != nil || len(ms) != 1 || ms[0].ID != id || ms[0].From != a.DID() || !ms[0].Authenticated {
		t.Fatalf("recipient has %s", raw)
	}
}

// panicky is an app callback that panics.
type panicky struct{}

func (panicky) OnProgress(string, int64, int64)        { panic("app bug") }
func (panicky) Rank(int64, int64, int64, string) int64 { panic("app bug") }

// TestNoPanicCrossesTheBoundary: an app callback's panic stays on its
// side and the wake completes; a nil Config or KeyStore is an error.
func TestNoPanicCrossesTheBoundary(t *testing.T) {
	if _, err := New(nil, nil); err == nil {
		t.Fatal("New(nil, nil) did not fail")
	}
	h, _, l := pairedLeaf(t, nil)
	l.cfg.Eviction = EvictRanked
	l.SetProgress(panicky{})
	l.SetRanker(panicky{})
	evs := signedEvents(t, 3, time.Now().Unix()-100, 3)
	h.save(t, evs)
	h.queue(t, newSender(t), l.DID(), 2)
	if err := l.Subscribe(fmt.Sprintf(`{"authors":[%q]}`, evs[0].PubKeyHex())); err != nil {
		t.Fatal(err)
	}
	if s := mustSync(t, l); !s.CaughtUp || s.PickedUp != 2 || s.EventsFetched != 3 {
		t.Fatalf("wake with panicking callbacks: %s", s.JSON())
	}
}
