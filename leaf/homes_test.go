package leaf

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fleetmesh.org/fleetmesh/netem"
	"fleetmesh.org/fleetmesh/nostr"
)

// twoHomes is a leaf paired with two homes, each behind its own proxy,
// mediation granted by both.
type twoHomes struct {
	homes   [2]*testHome
	proxies [2]*netem.Proxy
	leaf    *Leaf
}

func newTwoHomes(t *testing.T, filter string) *twoHomes {
	t.Helper()
	var th twoHomes
	for i := range th.homes {
		th.homes[i] = newTestHome(t, nil)
		p, err := netem.New(th.homes[i].addr, netem.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		th.proxies[i] = p
	}
	l, _ := newTestLeaf(t, th.homes[0], th.proxies[0].Addr(), filter)
	t.Cleanup(func() { l.Close() })
	if err := l.Pair(th.homes[1].invitation(th.proxies[1].Addr())); err != nil {
		t.Fatal(err)
	}
	if s := mustSync(t, l); !s.CaughtUp {
		t.Fatalf("pairing wake: %s", s.JSON())
	}
	th.leaf = l
	return &th
}

// stop closes the leaf, the proxies and the homes (before goleak looks).
func (th *twoHomes) stop() {
	th.leaf.Close()
	for i := range th.homes {
		th.proxies[i].Close()
		th.homes[i].stop()
	}
}

// holds reports whether h's store has every one of evs.
func (h *testHome) holds(t *testing.T, evs []*nostr.Event) bool {
	t.Helper()
	for _, ev := range evs {
		n := 0
		f := nostr.Filter{IDs: [][32]byte{ev.ID}}
		if err := h.st.Query(t.Context(), &f, 1, func(*nostr.Event) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return false
		}
	}
	return true
}

func publishAll(t *testing.T, l *Leaf, evs []*nostr.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := l.Publish(ev.AppendJSON(nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOutboxToEveryHome: with both homes up, what the user wrote offline
// reaches each of them in one wake, and leaves the outbox.
func TestOutboxToEveryHome(t *testing.T) {
	th := newTwoHomes(t, "")
	evs := signedEvents(t, 4, time.Now().Unix()-50, 4)
	publishAll(t, th.leaf, evs)
	s := mustSync(t, th.leaf)
	if !s.CaughtUp || s.OutboxSent != 4 || s.OutboxLeft != 0 {
		t.Fatalf("wake: %s", s.JSON())
	}
	for i, h := range th.homes {
		if !h.holds(t, evs) {
			t.Fatalf("home %d lacks the outbox events", i)
		}
	}
}

// TestTwoHomesOneDown: one of two homes refuses connections. The wake
// picks up the other's queue, catches up from it and gives it the
// outbox, leaves the dead home once its dials have failed for
// unreachableAfter, and returns before its budget, not caught up and
// naming the dead home.
func TestTwoHomesOneDown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	evs := signedEvents(t, 40, time.Now().Unix()-500, 40)
	th := newTwoHomes(t, fmt.Sprintf(`{"authors":[%q]}`, evs[0].PubKeyHex()))
	up, down := th.homes[1], th.homes[0]
	up.save(t, evs)
	queued := up.queue(t, newSender(t), th.leaf.DID(), 30)
	slices.Sort(queued)
	mine := signedEvents(t, 3, time.Now().Unix()-20, 3)
	publishAll(t, th.leaf, mine)
	th.proxies[0].Close() // home 0's address now refuses connections

	s := mustSync(t, th.leaf)
	if s.Cancelled || s.DurationMs >= th.leaf.cfg.BudgetMs {
		t.Fatalf("the wake waited for the dead home until its budget: %s", s.JSON())
	}
	if s.CaughtUp || !strings.Contains(s.Error, down.key.DID()) || !strings.Contains(s.Error, errUnreachable.Error()) {
		t.Fatalf("a wake with a dead home must say so: %s", s.JSON())
	}
	if s.PickedUp != 30 || s.EventsFetched != 40 || s.OutboxSent != 3 || s.OutboxLeft != 0 {
		t.Fatalf("wake: %s", s.JSON())
	}
	if got := storedMessageIDs(t, th.leaf); !slices.Equal(got, queued) {
		t.Fatalf("stored %d messages, queued %d", len(got), len(queued))
	}
	if !up.holds(t, mine) {
		t.Fatal("the live home lacks the outbox events")
	}
	th.stop()
}

// TestTwoHomesOneGoesDownMidWake: the home the catch-up runs against
// dies in the middle of it (its proxy closes every connection and
// refuses new ones). The catch-up goes on with the other home and
// fetches every missing event once, most of them from the survivor; the
// outbox reached the survivor; the wake returns before its budget.
func TestTwoHomesOneGoesDownMidWake(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 500
	evs := signedEvents(t, n, time.Now().Unix()-2*n, n)
	th := newTwoHomes(t, fmt.Sprintf(`{"authors":[%q]}`, evs[0].PubKeyHex()))
	for _, h := range th.homes {
		h.save(t, evs)
	}
	mine := signedEvents(t, 3, time.Now().Unix()-20, 3)
	publishAll(t, th.leaf, mine)
	// Home 0 answers first, so the catch-up starts there; a slow path
	// stretches the fetch so the kill lands inside it.
	th.proxies[0].SetConfig(netem.Config{Latency: 30 * time.Millisecond})
	th.proxies[1].SetConfig(netem.Config{Latency: 90 * time.Millisecond})
	before0, before := th.proxies[0].Stats().Down, th.proxies[1].Stats().Down
	var once sync.Once
	killed := make(chan struct{})
	th.leaf.SetProgress(progressFunc(func(stage string, done, _ int64) {
		if stage == "catchup" && done >= 100 {
			once.Do(func() {
				go func() {
					th.proxies[0].Close()
					close(killed)
				}()
			})
		}
	}))
	s := mustSync(t, th.leaf)
	select {
	case <-killed:
	default:
		t.Fatalf("the catch-up ended before home 0 was killed: %s", s.JSON())
	}
	if s.Cancelled || s.DurationMs >= th.leaf.cfg.BudgetMs {
		t.Fatalf("the wake ran to its budget: %s", s.JSON())
	}
	if s.EventsFetched != n || s.OutboxLeft != 0 {
		t.Fatalf("wake: %s", s.JSON())
	}
	size := len(evs[0].AppendJSON(nil))
	if got := th.proxies[0].Stats().Down - before0; got < int64(fetchChunk*size) {
		t.Fatalf("home 0 sent %d bytes: the catch-up did not start there", got)
	}
	// Home 0 died as the first fetches were stored: the fetches after
	// the first fetchParallel ones had not come back from it, so the
	// survivor sent them at least.
	least := int64((n - fetchParallel*fetchChunk) * size)
	if got := th.proxies[1].Stats().Down - before; got < least {
		t.Fatalf("the surviving home sent %d bytes, less than the %d of the events home 0 never sent", got, least)
	}
	raw, err := th.leaf.Query(fmt.Sprintf(`{"authors":[%q],"limit":%d}`, evs[0].PubKeyHex(), 2*n))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(raw), `"id":`); got != n {
		t.Fatalf("the leaf holds %d of the %d events", got, n)
	}
	if !th.homes[1].holds(t, mine) {
		t.Fatal("the surviving home lacks the outbox events")
	}
	th.stop()
}
