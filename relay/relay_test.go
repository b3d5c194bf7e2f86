package relay

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

type testRelay struct {
	t      *testing.T
	r      *Relay
	st     *store.Store
	srv    *httptest.Server
	url    string
	dialer *websocket.Dialer
}

// newTestRelay serves a relay on a fresh store over loopback, through
// Relay.Listener as the node serves it.
func newTestRelay(t *testing.T, mod func(*Config)) *testRelay {
	t.Helper()
	return serveTestRelay(t, mod, (*Relay).Listener, false)
}

// serveTestRelay is newTestRelay with the listener wrapping (nil: none)
// and TLS chosen by the caller.
func serveTestRelay(t *testing.T, mod func(*Config), wrap func(*Relay, net.Listener) net.Listener, useTLS bool) *testRelay {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EventsPerSecond, cfg.IPEventsPerSecond = 0, 0
	if mod != nil {
		mod(&cfg)
	}
	r := New(cfg, st, nil, nil)
	srv := startServer(r, wrap, useTLS)
	dialer := *websocket.DefaultDialer
	if useTLS {
		dialer.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	}
	tr := &testRelay{t: t, r: r, st: st, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http"), dialer: &dialer}
	t.Cleanup(func() {
		r.Shutdown(context.Background())
		srv.Close()
		st.Close()
	})
	return tr
}

// startServer serves r on loopback, through the listener wrap makes of the
// server's own (unless wrap is nil), over TLS if useTLS.
func startServer(r *Relay, wrap func(*Relay, net.Listener) net.Listener, useTLS bool) *httptest.Server {
	srv := httptest.NewUnstartedServer(r)
	if wrap != nil {
		srv.Listener = wrap(r, srv.Listener)
	}
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	return srv
}

type client struct {
	t         *testing.T
	ws        *websocket.Conn
	challenge string
}

func (tr *testRelay) dial() *client {
	tr.t.Helper()
	ws, _, err := tr.dialer.Dial(tr.url, nil)
	if err != nil {
		tr.t.Fatal(err)
	}
	tr.t.Cleanup(func() { ws.Close() })
	c := &client{t: tr.t, ws: ws}
	msg := c.read()
	if msg[0] != "AUTH" {
		tr.t.Fatalf("first message %v, want AUTH challenge", msg)
	}
	c.challenge = msg[1].(string)
	return c
}

func (c *client) send(v ...any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(v); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) read() []any {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var v []any
	if err := json.Unmarshal(data, &v); err != nil {
		c.t.Fatalf("relay sent non-JSON %q", data)
	}
	return v
}

// publish sends an event and returns its OK.
func (c *client) publish(ev *nostr.Event) (bool, string) {
	c.t.Helper()
	c.sendRaw(`["EVENT",` + string(ev.AppendJSON(nil)) + `]`)
	for {
		m := c.read()
		if m[0] == "OK" && m[1] == ev.IDHex() {
			return m[2].(bool), m[3].(string)
		}
	}
}

// req sends a REQ and collects events until EOSE or CLOSED.
func (c *client) req(sub string, filters ...string) (ids []string, closed string) {
	c.t.Helper()
	c.sendRaw(`["REQ","` + sub + `",` + strings.Join(filters, ",") + `]`)
	for {
		m := c.read()
		if len(m) < 2 || m[1] != sub {
			continue
		}
		switch m[0] {
		case "EVENT":
			ids = append(ids, m[2].(map[string]any)["id"].(string))
		case "EOSE":
			return ids, ""
		case "CLOSED":
			return ids, m[2].(string)
		}
	}
}

func signed(t *testing.T, k nostr.SecretKey, kind int, tags nostr.Tags, content string) *nostr.Event {
	t.Helper()
	if tags == nil {
		tags = nostr.Tags{}
	}
	e := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: kind, Tags: tags, Content: content}
	if err := k.Sign(e); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPublishQueryLive(t *testing.T) {
	tr := newTestRelay(t, nil)
	k, _ := nostr.GenerateSecretKey()
	a, b := tr.dial(), tr.dial()

	b.send("REQ", "live", map[string]any{"kinds": []int{1}, "limit": 0})
	if m := b.read(); m[0] != "EOSE" {
		t.Fatalf("want EOSE, got %v", m)
	}
	ev := signed(t, k, 1, nostr.Tags{{"t", "go"}}, "hello")
	if ok, msg := a.publish(ev); !ok || msg != "" {
		t.Fatalf("publish: %v %q", ok, msg)
	}
	if m := b.read(); m[0] != "EVENT" || m[1] != "live" {
		t.Fatalf("live: got %v", m)
	}
	if ok, msg := a.publish(ev); !ok || !strings.HasPrefix(msg, "duplicate:") {
		t.Fatalf("duplicate: %v %q", ok, msg)
	}
	got, _ := a.req("s", `{"#t":["go"]}`)
	if len(got) != 1 || got[0] != ev.IDHex() {
		t.Fatalf("stored query: %v", got)
	}
	bad := *ev
	bad.Content = "tampered"
	if ok, msg := a.publish(&bad); ok || !strings.HasPrefix(msg, "invalid:") {
		t.Fatalf("tampered: %v %q", ok, msg)
	}
	eph := signed(t, k, 20001, nil, "ephemeral")
	b.send("REQ", "eph", map[string]any{"kinds": []int{20001}})
	b.read()
	if ok, _ := a.publish(eph); !ok {
		t.Fatal("ephemeral refused")
	}
	if m := b.read(); m[0] != "EVENT" || m[1] != "eph" {
		t.Fatalf("ephemeral not delivered live: %v", m)
	}
	if got, _ := a.req("e2", `{"kinds":[20001]}`); len(got) != 0 {
		t.Fatalf("ephemeral was stored: %v", got)
	}
	a.send("COUNT", "c", map[string]any{"kinds": []int{1}})
	if m := a.read(); m[0] != "COUNT" || m[2].(map[string]any)["count"].(float64) != 1 {
		t.Fatalf("COUNT: %v", m)
	}
}

func TestLimits(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) {
		c.MaxFilters = 2
		c.MaxSubscriptions = 2
		c.MaxTags = 3
		c.MaxEventBytes = 2000
		c.MaxMessageBytes = 4000
		c.EventsPerSecond, c.EventsBurst = 1, 2
	})
	k, _ := nostr.GenerateSecretKey()
	c := tr.dial()
	if _, closed := c.req("f", "{}", "{}", "{}"); !strings.HasPrefix(closed, "invalid:") {
		t.Fatalf("too many filters: %q", closed)
	}
	c.req("s1", `{"limit":0}`)
	c.req("s2", `{"limit":0}`)
	if _, closed := c.req("s3", `{"limit":0}`); !strings.HasPrefix(closed, "blocked:") {
		t.Fatalf("too many subscriptions: %q", closed)
	}
	if ok, msg := c.publish(signed(t, k, 1, nostr.Tags{{"t", "1"}, {"t", "2"}, {"t", "3"}, {"t", "4"}}, "")); ok || !strings.HasPrefix(msg, "invalid:") {
		t.Fatalf("too many tags: %v %q", ok, msg)
	}
	if ok, msg := c.publish(signed(t, k, 1, nil, strings.Repeat("x", 2500))); ok || !strings.HasPrefix(msg, "invalid:") {
		t.Fatalf("event too large: %v %q", ok, msg)
	}
	// The burst is spent by the two refusals above; the next is throttled.
	if ok, msg := c.publish(signed(t, k, 1, nil, "rate")); ok || !strings.HasPrefix(msg, "rate-limited:") {
		t.Fatalf("rate limit: %v %q", ok, msg)
	}
	c.sendRaw(`["EVENT",` + strings.Repeat(" ", 5000) + `{}]`)
	if m := c.read(); m[0] != "NOTICE" || !strings.HasPrefix(m[1].(string), "invalid:") {
		t.Fatalf("oversized message: %v", m)
	}
	c.sendRaw(`["REQ","x",{"kinds":"nope"}]`)
	if m := c.read(); m[0] != "CLOSED" || !strings.HasPrefix(m[2].(string), "invalid:") {
		t.Fatalf("bad filter: %v", m)
	}
	c.sendRaw(`not json`)
	if m := c.read(); m[0] != "NOTICE" {
		t.Fatalf("garbage: %v", m)
	}
	// The connection and its subscriptions survive all of that.
	c.send("CLOSE", "s1")
	if ids, closed := c.req("s4", `{"limit":1}`); closed != "" {
		t.Fatalf("after bad input: %v %q", ids, closed)
	}
}

func TestAuthAndProtected(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) { c.AuthRequiredKinds = []int{4} })
	alice, _ := nostr.GenerateSecretKey()
	bob, _ := nostr.GenerateSecretKey()
	c := tr.dial()
	prot := signed(t, alice, 1, nostr.Tags{{"-"}}, "protected")
	if ok, msg := c.publish(prot); ok || !strings.HasPrefix(msg, "auth-required:") {
		t.Fatalf("protected unauthenticated: %v %q", ok, msg)
	}
	dm := signed(t, alice, 4, nostr.Tags{{"p", fmt.Sprintf("%x", bob.PubKey())}}, "secret")
	if ok, msg := c.publish(dm); ok || !strings.HasPrefix(msg, "auth-required:") {
		t.Fatalf("auth kind unauthenticated: %v %q", ok, msg)
	}
	if _, closed := c.req("dm", `{"kinds":[4]}`); !strings.HasPrefix(closed, "auth-required:") {
		t.Fatalf("reading auth kind: %q", closed)
	}
	wrong := signed(t, bob, nostr.KindClientAuth, nostr.Tags{{"relay", tr.url}, {"challenge", "nope"}}, "")
	c.send("AUTH", wrong)
	if m := c.read(); m[0] != "OK" || m[2] != false {
		t.Fatalf("wrong challenge accepted: %v", m)
	}
	auth := signed(t, bob, nostr.KindClientAuth, nostr.Tags{{"relay", tr.url + "/"}, {"challenge", c.challenge}}, "")
	c.send("AUTH", auth)
	if m := c.read(); m[0] != "OK" || m[2] != true {
		t.Fatalf("AUTH: %v", m)
	}
	if ok, msg := c.publish(prot); ok || !strings.HasPrefix(msg, "restricted:") {
		t.Fatalf("protected as someone else: %v %q", ok, msg)
	}
	if ok, msg := c.publish(dm); !ok {
		t.Fatalf("auth kind after AUTH: %q", msg)
	}
	auth2 := signed(t, alice, nostr.KindClientAuth, nostr.Tags{{"relay", tr.url}, {"challenge", c.challenge}}, "")
	c.send("AUTH", auth2)
	c.read()
	if ok, msg := c.publish(prot); !ok {
		t.Fatalf("protected as author: %q", msg)
	}
	other := tr.dial()
	if ids, _ := other.req("all", `{}`); len(ids) != 1 || ids[0] != prot.IDHex() {
		t.Fatalf("unauthenticated reader sees %v, want only the protected note", ids)
	}
}

func TestShutdownKeepsAcknowledged(t *testing.T) {
	tr := newTestRelay(t, nil)
	k, _ := nostr.GenerateSecretKey()
	c := tr.dial()
	var sent []*nostr.Event
	for i := range 50 {
		ev := signed(t, k, 1, nil, fmt.Sprint(i))
		sent = append(sent, ev)
		c.sendRaw(`["EVENT",` + string(ev.AppendJSON(nil)) + `]`)
	}
	acked := map[string]bool{}
	c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(acked) < 10 {
		m := c.read()
		if m[0] == "OK" && m[2] == true {
			acked[m[1].(string)] = true
		}
	}
	if err := tr.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			break
		}
		var m []any
		json.Unmarshal(data, &m)
		if m[0] == "OK" && m[2] == true {
			acked[m[1].(string)] = true
		}
	}
	for _, ev := range sent {
		if !acked[ev.IDHex()] {
			continue
		}
		found := false
		tr.st.Query(context.Background(), &nostr.Filter{IDs: [][32]byte{ev.ID}}, 1, func(*nostr.Event) bool { found = true; return false })
		if !found {
			t.Fatalf("acknowledged event %s missing after shutdown", ev.IDHex())
		}
	}
}

// TestLookupMerges backs the Lookup hook with a second real store, as the
// mesh would be, and checks that REQ merges both, newest first, within the
// limit, without duplicates.
func TestLookupMerges(t *testing.T) {
	other, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tr := newTestRelay(t, nil)
	tr.r.Lookup = func(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event)) {
		other.Query(ctx, f, limit, func(ev *nostr.Event) bool { fn(ev); return true })
	}
	k, _ := nostr.GenerateSecretKey()
	var all []*nostr.Event
	for i := range 6 {
		ev := signed(t, k, 1, nil, fmt.Sprint(i))
		ev.CreatedAt = 1_700_000_000 + int64(i)
		k.Sign(ev)
		all = append(all, ev)
		if i%2 == 0 || i == 5 {
			tr.st.Save(context.Background(), ev)
		}
		if i%2 == 1 {
			other.Save(context.Background(), ev)
		}
	}
	c := tr.dial()
	got, _ := c.req("m", `{"kinds":[1],"limit":4}`)
	want := []string{all[5].IDHex(), all[4].IDHex(), all[3].IDHex(), all[2].IDHex()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("merged REQ:\n got %v\nwant %v", got, want)
	}
	got, _ = c.req("id", `{"ids":["`+all[1].IDHex()+`"]}`)
	if len(got) != 1 {
		t.Fatalf("REQ by id held only elsewhere: %v", got)
	}
}

// TestLookupAsksOnlyMissingIDs: a REQ by ids asks the mesh only for the
// ids this node does not hold (and not at all when it holds them all), so
// that a lookup never fetches again what the store already answered.
func TestLookupAsksOnlyMissingIDs(t *testing.T) {
	other, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tr := newTestRelay(t, nil)
	var mu sync.Mutex
	var asked [][]string
	tr.r.Lookup = func(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event)) {
		var ids []string
		for _, id := range f.IDs {
			ids = append(ids, hex.EncodeToString(id[:]))
		}
		mu.Lock()
		asked = append(asked, ids)
		mu.Unlock()
		other.Query(ctx, f, limit, func(ev *nostr.Event) bool { fn(ev); return true })
	}
	k, _ := nostr.GenerateSecretKey()
	var evs []*nostr.Event
	for i := range 3 {
		ev := signed(t, k, 1, nil, fmt.Sprint(i))
		evs = append(evs, ev)
		other.Save(context.Background(), ev)
		if i < 2 {
			tr.st.Save(context.Background(), ev)
		}
	}
	c := tr.dial()
	ids := func(evs ...*nostr.Event) string {
		var q []string
		for _, ev := range evs {
			q = append(q, `"`+ev.IDHex()+`"`)
		}
		return `{"ids":[` + strings.Join(q, ",") + `]}`
	}
	if got, _ := c.req("held", ids(evs[0], evs[1])); len(got) != 2 {
		t.Fatalf("REQ of two held ids: %v", got)
	}
	if got, _ := c.req("one missing", ids(evs[0], evs[1], evs[2], evs[2])); len(got) != 3 {
		t.Fatalf("REQ of two held ids and one held elsewhere: %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := [][]string{{evs[2].IDHex()}}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("the mesh was asked for %v, want %v", asked, want)
	}
}

// TestInterest checks that the Interest hook hears of every live
// subscription and that each is released exactly once, however it ends.
func TestInterest(t *testing.T) {
	tr := newTestRelay(t, nil)
	var mu sync.Mutex
	open := map[string]int{} // first filter's JSON -> live count
	released := 0
	tr.r.Interest = func(fs []nostr.Filter) func() {
		raw, _ := fs[0].MarshalJSON()
		key := string(raw)
		mu.Lock()
		open[key]++
		mu.Unlock()
		return func() {
			mu.Lock()
			open[key]--
			released++
			mu.Unlock()
		}
	}
	state := func() (map[string]int, int) {
		mu.Lock()
		defer mu.Unlock()
		cp := map[string]int{}
		for k, v := range open {
			if v != 0 {
				cp[k] = v
			}
		}
		return cp, released
	}
	waitFor := func(what string, want map[string]int, wantReleased int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, rel := state()
			if fmt.Sprint(got) == fmt.Sprint(want) && rel == wantReleased {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: open %v released %d, want %v and %d", what, got, rel, want, wantReleased)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	a := `{"authors":["` + strings.Repeat("a", 64) + `"]}`
	b := `{"authors":["` + strings.Repeat("b", 64) + `"]}`
	c := tr.dial()
	c.req("s1", a)
	c.req("s2", b)
	waitFor("two REQs", map[string]int{a: 1, b: 1}, 0)
	c.send("CLOSE", "s1")
	waitFor("CLOSE", map[string]int{b: 1}, 1)
	c.req("s2", a) // the same id replaces the subscription
	waitFor("REQ reusing an id", map[string]int{a: 1}, 2)
	c.ws.Close()
	waitFor("connection closed", map[string]int{}, 3)
}
