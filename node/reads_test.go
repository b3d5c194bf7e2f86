package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-msgio"

	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// wsClient is a Nostr client of a test part's relay, served over loopback.
type wsClient struct {
	t  testing.TB
	ws *websocket.Conn
}

func dialPart(t testing.TB, p *testPart) *wsClient {
	t.Helper()
	srv := httptest.NewServer(p.rl)
	t.Cleanup(srv.Close)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &wsClient{t: t, ws: ws}
}

func (c *wsClient) read() []json.RawMessage {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var m []json.RawMessage
	if err := c.ws.ReadJSON(&m); err != nil {
		c.t.Fatal(err)
	}
	return m
}

// publish sends ev and fails the test unless it is acknowledged OK true.
func (c *wsClient) publish(ev *nostr.Event) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`["EVENT",`+string(ev.AppendJSON(nil))+`]`)); err != nil {
		c.t.Fatal(err)
	}
	for {
		m := c.read()
		if len(m) >= 4 && string(m[0]) == `"OK"` && string(m[1]) == `"`+ev.IDHex()+`"` {
			if string(m[2]) != "true" {
				c.t.Fatalf("%s refused: %s", ev.Content, m[3])
			}
			return
		}
	}
}

var reqs atomic.Int64

// req sends a REQ of one filter and returns the ids of the events of its
// stored answer, in order, and the time to its EOSE; the subscription is
// closed after.
func (c *wsClient) req(filter string) ([]string, time.Duration) {
	c.t.Helper()
	sub := fmt.Sprint("r", reqs.Add(1))
	start := time.Now()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`["REQ","`+sub+`",`+filter+`]`)); err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for {
		m := c.read()
		if len(m) < 2 || string(m[1]) != `"`+sub+`"` {
			continue
		}
		switch string(m[0]) {
		case `"EVENT"`:
			var ev struct{ ID string }
			json.Unmarshal(m[2], &ev)
			ids = append(ids, ev.ID)
		case `"EOSE"`:
			took := time.Since(start)
			c.ws.WriteMessage(websocket.TextMessage, []byte(`["CLOSE","`+sub+`"]`))
			return ids, took
		default:
			c.t.Fatalf("REQ %s: %s", filter, m)
		}
	}
}

// signedAt signs an event of kind with tags at created_at ts.
func signedAt(t testing.TB, k nostr.SecretKey, ts int64, kind int, content string, tags ...[]string) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{CreatedAt: ts, Kind: kind, Tags: append(nostr.Tags{}, tags...), Content: content}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func hexIDs(evs ...*nostr.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.IDHex())
	}
	return out
}

// TestReadYourWritesAtAMeshedNode is issue 30's first scenario in
// memory: three storage nodes hold every event; the two peers of node 0
// then stop applying what the mesh brings (as peers that have not yet
// applied a write do), and node 0's client deletes a note by id, replaces
// a profile, replaces an article and deletes another by address, each
// acknowledged OK true. Every REQ at node 0 right after reflects all four,
// though its lookups ask peers that still serve the old versions. Once the
// peers apply what they missed, their reads agree.
func TestReadYourWritesAtAMeshedNode(t *testing.T) {
	var holding atomic.Bool
	_, parts := startParts(t, 3, func(i int, ps []*testPart) partSpec {
		s := testSpec()
		if i > 0 {
			s.mesh.Bootstrap = []string{ps[0].p2pAddr()}
			s.hold = func(*nostr.Event, bool) bool { return holding.Load() }
		}
		return s
	})
	agreeOnAll(t, parts)
	a := dialPart(t, parts[0])
	k, _ := nostr.GenerateSecretKey()
	pk := fmt.Sprintf("%x", k.PubKey())
	now := time.Now().Unix()
	n := signedAt(t, k, now-100, 1, "a note")
	p1 := signedAt(t, k, now-100, 0, `{"name":"old"}`)
	v1 := signedAt(t, k, now-100, 30023, "article x, first", []string{"d", "x"})
	w1 := signedAt(t, k, now-100, 30023, "article y", []string{"d", "y"})
	for _, ev := range []*nostr.Event{n, p1, v1, w1} {
		a.publish(ev)
	}
	eventually(t, 60*time.Second, "both peers store the four events", func() bool {
		for _, p := range parts[1:] {
			for _, ev := range []*nostr.Event{n, p1, v1, w1} {
				if !p.holds(t, ev.ID) {
					return false
				}
			}
		}
		return true
	})
	holding.Store(true)
	del := signedAt(t, k, now-10, 5, "", []string{"e", n.IDHex()})
	p2 := signedAt(t, k, now-10, 0, `{"name":"new"}`)
	v2 := signedAt(t, k, now-10, 30023, "article x, second", []string{"d", "x"})
	delAddr := signedAt(t, k, now-10, 5, "", []string{"a", "30023:" + pk + ":y"})
	for _, ev := range []*nostr.Event{del, p2, v2, delAddr} {
		a.publish(ev)
	}
	reads := []struct {
		what, filter string
		want         []string
	}{
		{"the deleted note by id", `{"ids":["` + n.IDHex() + `"]}`, nil},
		{"the author's notes", `{"kinds":[1],"authors":["` + pk + `"]}`, nil},
		{"the profile", `{"kinds":[0],"authors":["` + pk + `"]}`, hexIDs(p2)},
		{"the old profile by id", `{"ids":["` + p1.IDHex() + `"]}`, nil},
		{"the articles", `{"kinds":[30023],"authors":["` + pk + `"]}`, hexIDs(v2)},
		{"the article deleted by address, by id", `{"ids":["` + w1.IDHex() + `"]}`, nil},
		{"the deletions", `{"kinds":[5],"authors":["` + pk + `"]}`, hexIDs(del, delAddr)},
	}
	for _, r := range reads {
		got, _ := a.req(r.filter)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(r.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s right after the writes at node 0: got %v, want %v", r.what, got, want)
		}
	}
	// The reads proved something only if the peers still hold the old
	// versions that node 0's lookups were offered.
	for i, p := range parts[1:] {
		for _, ev := range []*nostr.Event{n, p1, v1, w1} {
			if !p.holds(t, ev.ID) {
				t.Fatalf("node %d applied %q while held back", i+1, ev.Content)
			}
		}
	}
	holding.Store(false)
	for i, p := range parts[1:] {
		c := dialPart(t, p)
		eventually(t, 60*time.Second, fmt.Sprintf("node %d's reads agree once it applies what it missed", i+1), func() bool {
			for _, r := range reads {
				got, _ := c.req(r.filter)
				slices.Sort(got)
				if !slices.Equal(got, slices.Sorted(slices.Values(r.want))) {
					return false
				}
			}
			return true
		})
	}
}

// TestDeletionTravelsLive: with the peers taking nothing by meshsync
// (anti-entropy), a deletion accepted at one node reaches the nodes
// holding its target by GossipSub, as a new event does; a node holding
// the deletion then refuses the target from any path, and serves it to
// no REQ.
func TestDeletionTravelsLive(t *testing.T) {
	_, parts := startParts(t, 3, func(i int, ps []*testPart) partSpec {
		s := testSpec()
		if i > 0 {
			s.mesh.Bootstrap = []string{ps[0].p2pAddr()}
			s.hold = func(_ *nostr.Event, sync bool) bool { return sync }
		}
		return s
	})
	agreeOnAll(t, parts)
	k, _ := nostr.GenerateSecretKey()
	// GossipSub carries a topic's messages once its peers have grafted
	// one another, and a message published before is lost (anti-entropy
	// would repair it, but it is held here): warm the author's topic with
	// notes until one reaches both peers by GossipSub alone.
	both := func(ev *nostr.Event) bool { return parts[1].holds(t, ev.ID) && parts[2].holds(t, ev.ID) }
	for i, deadline := 0, time.Now().Add(90*time.Second); ; i++ {
		warm := note(t, k, fmt.Sprint("warm-up ", i))
		parts[0].publish(t, warm)
		arrived := false
		for wait := time.Now().Add(3 * time.Second); !arrived && time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
			arrived = both(warm)
		}
		if arrived {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not within 90s: a note reaches both peers by GossipSub")
		}
	}
	ev := note(t, k, "to be deleted")
	t0 := time.Now()
	parts[0].publish(t, ev)
	eventually(t, 30*time.Second, "the new event reaches both peers", func() bool { return both(ev) })
	newEvent := time.Since(t0)
	del := signedAt(t, k, time.Now().Unix(), 5, "", []string{"e", ev.IDHex()})
	t0 = time.Now()
	parts[0].publish(t, del)
	eventually(t, 30*time.Second, "the deletion reaches both peers and removes the event", func() bool {
		return !parts[1].holds(t, ev.ID) && !parts[2].holds(t, ev.ID) && parts[1].holds(t, del.ID) && parts[2].holds(t, del.ID)
	})
	t.Logf("a new event reached both peers in %v, its deletion in %v", newEvent, time.Since(t0))
	// The target arriving again, from the mesh or a client, is refused.
	for i, p := range parts {
		if res, err := p.rl.AddEvent(context.Background(), ev, relay.FromMesh); err != nil || res != store.Deleted {
			t.Fatalf("node %d took the deleted event again from the mesh: %v %v", i, res, err)
		}
		if got, _ := dialPart(t, p).req(`{"ids":["` + ev.IDHex() + `"]}`); len(got) != 0 {
			t.Fatalf("node %d serves the deleted event: %v", i, got)
		}
	}
}

// agreeOnAll waits until every part places over all of them.
func agreeOnAll(t testing.TB, parts []*testPart) {
	t.Helper()
	var ids []peer.ID
	for _, p := range parts {
		ids = append(ids, p.h.ID())
	}
	agreeOn(t, parts, ids)
}

// TestREQWithAStalledPeer: a peer that takes lookups' streams and never
// answers (a killed process behind a connection that still looks open)
// costs one REQ at most the lookup grace, not every REQ its lookup
// timeout: no REQ after it stalls reaches the timeout, and the p99 of
// REQs by author is compared with the p99 before it stalled, same run.
func TestREQWithAStalledPeer(t *testing.T) {
	rcfg := relay.DefaultConfig()
	rcfg.LookupTimeout.Duration = 5 * time.Second
	_, parts := startParts(t, 3, func(i int, ps []*testPart) partSpec {
		s := testSpec()
		s.relay = &rcfg
		if i > 0 {
			s.mesh.Bootstrap = []string{ps[0].p2pAddr()}
		}
		return s
	})
	agreeOnAll(t, parts)
	k, _ := nostr.GenerateSecretKey()
	ev := note(t, k, "held everywhere")
	parts[1].publish(t, ev)
	eventually(t, 30*time.Second, "every node holds the note", func() bool {
		return parts[0].holds(t, ev.ID) && parts[2].holds(t, ev.ID)
	})
	a := dialPart(t, parts[0])
	filter := `{"authors":["` + fmt.Sprintf("%x", k.PubKey()) + `"]}`
	const n = 60
	measure := func() []time.Duration {
		var ds []time.Duration
		for range n {
			got, took := a.req(filter)
			if len(got) != 1 {
				t.Fatalf("REQ by author: %v", got)
			}
			ds = append(ds, took)
		}
		slices.Sort(ds)
		return ds
	}
	before := measure()
	// Node 2 stops as a killed process does for its peers: its own
	// sessions stop, and its connections stay open with nobody answering.
	parts[2].mp.cancel()
	var asked atomic.Int64
	parts[2].h.SetStreamHandler(protocol.ID(meshsync.ProtocolID), func(s network.Stream) {
		// Takes the stream, never answers; counts node 0's lookups
		// (its anti-entropy sessions open streams too).
		first, err := msgio.NewVarintReaderSize(s, meshsync.MaxFrameBytes).ReadMsg()
		if err == nil && s.Conn().RemotePeer() == parts[0].h.ID() && strings.HasPrefix(string(first), `["REQ","lookup"`) {
			asked.Add(1)
		}
		io.Copy(io.Discard, s)
	})
	stalled := time.Now()
	after := measure()
	// A silent peer is asked again after silenceRetry (30 s): a slow
	// machine may take that long for the REQs.
	retries := int64(time.Since(stalled) / (30 * time.Second))
	p99 := func(ds []time.Duration) time.Duration { return ds[(len(ds)*99+99)/100-1] }
	t.Logf("REQ by author with lookups: p50 %v p99 %v before the peer stalled, p50 %v p99 %v after (slowest %v); lookup_grace %v, lookup_timeout %v",
		before[n/2], p99(before), after[n/2], p99(after), after[n-1], meshsync.DefaultLookupGrace, rcfg.LookupTimeout.Duration)
	if slowest := after[n-1]; slowest >= rcfg.LookupTimeout.Duration {
		t.Fatalf("a REQ after the peer stalled waited %v, its whole lookup_timeout %v", slowest, rcfg.LookupTimeout.Duration)
	}
	if got := asked.Load(); got > 1+retries {
		t.Fatalf("%d of the %d REQs after the peer stalled asked it; the first should have left it out of the rest", got, n)
	}
}
