package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

func TestBudgetFor(t *testing.T) {
	for _, tc := range []struct{ limit, conns int }{
		{1024, 1024 - 256 - 128 - 64 - 64},
		{65536, 65536 - 8192 - 8192 - 4096 - 64},
		{256, minConns},
	} {
		b := BudgetFor(tc.limit)
		if b.Conns != tc.conns {
			t.Errorf("BudgetFor(%d).Conns = %d, want %d", tc.limit, b.Conns, tc.conns)
		}
		if tc.limit > 512 && b.Store+b.Mesh+b.Iroh+b.Spare+b.Conns != tc.limit {
			t.Errorf("BudgetFor(%d) does not add up: %s", tc.limit, b)
		}
	}
}

// TestGateRefusesAtAccept checks that the listener refuses a connection
// over the per-address cap with a readable HTTP 429 and Retry-After, and
// that a slot frees when a connection closes.
func TestGateRefusesAtAccept(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConnsPerIP = 2
	cfg.MaxConns = 100
	r := New(cfg, nil, nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl := r.Listener(ln)
	defer gl.Close()
	go func() {
		// Owned by the listener: ends when it closes.
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			go func() {
				// Owned by the connection: holds it until the client
				// closes it.
				var b [1]byte
				c.Read(b[:])
				c.Close()
			}()
		}
	}()
	var held []net.Conn
	for i := 0; i < 2+gateSlack; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	refused := func() *http.Response {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return nil
		}
		return res
	}
	res := refused()
	if res == nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("connection over the cap: %+v, want 429 with Retry-After", res)
	}
	held[0].Close()
	// The server notices the close asynchronously: poll until a request
	// is no longer refused (its read then blocks until the deadline).
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		var b [1]byte
		_, err = c.Read(b[:])
		c.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no slot freed after closing a connection")
		}
	}
	for _, c := range held[1:] {
		c.Close()
	}
}

// TestQueryBudget checks that a connection sending broad REQs in a loop
// is refused with rate-limited once its budget is spent, while another
// connection is still served.
func TestQueryBudget(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) {
		c.ReqRowsPerSecond = 10 // a burst of 40 rows
		c.IPReqRowsPerSecond = 1 << 20
	})
	k, _ := nostr.GenerateSecretKey()
	pub := tr.dial()
	for i := range 100 {
		if ok, msg := pub.publish(signed(t, k, 1, nil, fmt.Sprint("e", i))); !ok {
			t.Fatal(msg)
		}
	}
	greedy := tr.dial()
	var refused string
	for i := 0; i < 5 && refused == ""; i++ {
		_, refused = greedy.req(fmt.Sprint("s", i), `{}`)
	}
	if !strings.HasPrefix(refused, "rate-limited:") {
		t.Fatalf("a loop of broad REQs was never refused: %q", refused)
	}
	ids, closed := tr.dial().req("other", `{"limit":10}`)
	if closed != "" || len(ids) != 10 {
		t.Fatalf("another connection: %d events, closed %q", len(ids), closed)
	}
}

// TestNegSessionCaps checks the NIP-77 session caps per connection and
// per address.
func TestNegSessionCaps(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) {
		c.MaxNegSessions = 2
		c.IPMaxNegSessions = 3
	})
	open := func(c *client, id string) string {
		c.send("NEG-OPEN", id, map[string]any{}, "61")
		for {
			m := c.read()
			if m[1] != id {
				continue
			}
			if m[0] == "NEG-ERR" {
				return m[2].(string)
			}
			return ""
		}
	}
	a, b := tr.dial(), tr.dial()
	for _, id := range []string{"a1", "a2"} {
		if reason := open(a, id); reason != "" {
			t.Fatalf("session %s refused: %s", id, reason)
		}
	}
	if reason := open(a, "a3"); !strings.Contains(reason, "open sync sessions") {
		t.Fatalf("third session on one connection: %q", reason)
	}
	if reason := open(b, "b1"); reason != "" {
		t.Fatalf("first session on a second connection refused: %s", reason)
	}
	if reason := open(b, "b2"); !strings.Contains(reason, "your address") {
		t.Fatalf("fourth session from one address: %q", reason)
	}
	a.send("NEG-CLOSE", "a1")
	// NEG-CLOSE has no answer; the next NEG-OPEN on the same connection
	// is read after it, so the slot is free by then.
	if reason := open(a, "a4"); reason != "" {
		t.Fatalf("session after NEG-CLOSE refused: %s", reason)
	}
}

// TestCountBounded checks that a COUNT walk stops at MaxCountRows and
// says it is approximate.
func TestCountBounded(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) { c.MaxCountRows = 10 })
	k, _ := nostr.GenerateSecretKey()
	c := tr.dial()
	for i := range 30 {
		if ok, msg := c.publish(signed(t, k, 1, nil, fmt.Sprint("e", i))); !ok {
			t.Fatal(msg)
		}
	}
	c.send("COUNT", "n", map[string]any{"kinds": []int{1}}, map[string]any{"kinds": []int{2}})
	for {
		m := c.read()
		if m[0] != "COUNT" {
			continue
		}
		body := m[2].(map[string]any)
		if body["approximate"] != true || body["count"].(float64) > 10 {
			t.Fatalf("bounded count: %v", body)
		}
		return
	}
}

// TestFirstMessageTimeout checks that a connection that never sends a
// message is closed, even though it answers pings.
func TestFirstMessageTimeout(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) {
		c.FirstMessageTimeout = setting.DurationOf(100 * time.Millisecond)
		c.PingInterval = 50 * time.Millisecond
	})
	c := tr.dial()
	c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := c.ws.ReadMessage(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("a silent connection was not closed")
			}
			return
		}
	}
}

// TestInvalidFloodCloses checks that a connection sending malformed
// messages without end is closed, after a NOTICE saying why.
func TestInvalidFloodCloses(t *testing.T) {
	tr := newTestRelay(t, nil)
	c := tr.dial()
	for i := 0; i < invalidBurst+5; i++ {
		if c.ws.WriteMessage(1, []byte("[[[")) != nil {
			break
		}
	}
	c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	sawClose := false
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection was not closed")
			}
			break
		}
		if strings.Contains(string(data), "too many invalid messages") {
			sawClose = true
		}
	}
	if !sawClose {
		t.Fatal("no NOTICE said why the connection closed")
	}
}

// TestIPMaxSubscriptions checks the per-address subscription cap across
// connections, and that CLOSE gives a slot back.
func TestIPMaxSubscriptions(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) { c.IPMaxSubscriptions = 3 })
	a, b := tr.dial(), tr.dial()
	for _, id := range []string{"a1", "a2"} {
		if _, closed := a.req(id, `{"limit":0}`); closed != "" {
			t.Fatalf("%s: %s", id, closed)
		}
	}
	if _, closed := b.req("b1", `{"limit":0}`); closed != "" {
		t.Fatalf("b1: %s", closed)
	}
	if _, closed := b.req("b2", `{"limit":0}`); !strings.Contains(closed, "your address") {
		t.Fatalf("fourth subscription from one address: %q", closed)
	}
	// Reusing an id replaces the subscription and keeps the count.
	if _, closed := a.req("a1", `{"limit":0}`); closed != "" {
		t.Fatalf("replacing a1: %s", closed)
	}
	a.send("CLOSE", "a2")
	if _, closed := a.req("a3", `{"limit":0}`); closed != "" {
		t.Fatalf("after CLOSE: %s", closed)
	}
}

// TestMeterKeepsRawQueries checks that the work meter wrapped around a
// store that answers QueryRaw keeps that path, so a REQ writes each
// event's stored record instead of decoding and re-encoding it, and that
// rows read through it are still metered.
func TestMeterKeepsRawQueries(t *testing.T) {
	tr := newTestRelay(t, nil)
	rq, ok := tr.r.store.(rawQuerier)
	if !ok {
		t.Fatalf("the relay's metered store %T hides QueryRaw", tr.r.store)
	}
	k, _ := nostr.GenerateSecretKey()
	ev := signed(t, k, 1, nil, "raw")
	if _, err := tr.st.Save(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	ctx, m := withMeter(context.Background())
	n := 0
	if err := rq.QueryRaw(ctx, &nostr.Filter{Kinds: []int{1}}, 10, func(r eventstore.Raw) bool {
		n++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 || m.rows.Load() != 1 {
		t.Fatalf("got %d events, %d rows metered; want 1 and 1", n, m.rows.Load())
	}
}

// TestRefusedSubsFloodCloses checks that a connection that keeps sending
// REQs after being refused for the subscription cap is closed like any
// flood of invalid messages, after at most invalidBurst (and a few more
// a second) refusals.
func TestRefusedSubsFloodCloses(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) { c.IPMaxSubscriptions = 1 })
	c := tr.dial()
	const reqs = 3 * invalidBurst
	go func() {
		// Owned by the test: ends when the writes fail or are done.
		for i := range reqs {
			if c.ws.WriteMessage(1, []byte(fmt.Sprintf(`["REQ","s%d",{"limit":0}]`, i))) != nil {
				return
			}
		}
	}()
	c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	refused, sawClose := 0, false
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the connection was not closed after %d refusals", refused)
			}
			break
		}
		switch {
		case strings.HasPrefix(string(data), `["CLOSED"`):
			refused++
		case strings.Contains(string(data), "too many invalid messages"):
			sawClose = true
		}
	}
	if !sawClose || refused > invalidBurst+20 {
		t.Fatalf("closed after %d refusals (NOTICE seen: %v), want about %d", refused, sawClose, invalidBurst)
	}
}

// TestInvalidAllowancePerAddress checks that an address that spends its
// invalid-message allowance on one connection cannot get a fresh one by
// reconnecting: its next connection is closed at its first invalid
// message.
func TestInvalidAllowancePerAddress(t *testing.T) {
	tr := newTestRelay(t, nil)
	// Oversized messages count ten each: twenty of them spend the
	// address's 200, over two connections (a connection's own allowance
	// is 100).
	big := `["EVENT",{"content":"` + strings.Repeat("x", DefaultConfig().MaxMessageBytes) + `"}]`
	closedAfter := func(c *client, msg string, n int) int {
		go func() {
			// Owned by the test: ends when the writes fail or are done.
			for range n {
				if c.ws.WriteMessage(1, []byte(msg)) != nil {
					return
				}
			}
		}()
		c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		answered := 0
		for {
			_, data, err := c.ws.ReadMessage()
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("the connection was not closed after %d answers", answered)
				}
				return answered
			}
			if strings.HasPrefix(string(data), `["NOTICE","invalid:`) {
				answered++
			}
		}
	}
	start := time.Now()
	if n := closedAfter(tr.dial(), big, 20); n < 9 || n > 11 {
		t.Fatalf("first connection: %d oversized messages answered before the close, want 10", n)
	}
	if n := closedAfter(tr.dial(), big, 20); n < 9 || n > 11+int(time.Since(start).Seconds()) {
		t.Fatalf("second connection: %d answered before the close, want the address's other 10", n)
	}
	// The allowance refills at ten a second: one oversized message's
	// worth a second since the first.
	refilled := 1 + int(time.Since(start).Seconds())
	if n := closedAfter(tr.dial(), big, 20); n > refilled {
		t.Fatalf("third connection: %d oversized messages answered, want the close after %d", n, refilled)
	}
}

// TestGateIPv6Caps checks the accept gate's IPv6 caps: per /64 (one host,
// whatever address it takes from it) and, looser, per /56 (a site), and
// that a closed connection gives its slot back to both.
func TestGateIPv6Caps(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConnsPerIP, cfg.MaxConns = 2, 1000
	g := newGate(&cfg, newMetrics(nil))
	perAddr, perWide := 2+gateSlack, 2*ipv6WideFactor+gateSlack
	key := func(addr string) clientaddr.Key { return clientaddr.Of("[" + addr + "]:4000") }
	open := func(addr string) string { return g.open(key(addr)) }
	// One /64, a fresh address for every connection.
	for i := range perAddr {
		if why := open(fmt.Sprintf("2001:db8:0:1::%x", i+1)); why != "" {
			t.Fatalf("connection %d from one /64 refused: %s", i, why)
		}
	}
	if why := open("2001:db8:0:1::ffff"); why != "addr" {
		t.Fatalf("connection over the /64's cap of %d: %q, want addr", perAddr, why)
	}
	// Other /64s of the same /56 fill the rest of the /56's cap.
	for i := range perWide - perAddr {
		if why := open(fmt.Sprintf("2001:db8:0:%x::1", 2+i/perAddr)); why != "" {
			t.Fatalf("connection %d from the /56's other /64s refused: %s", i, why)
		}
	}
	if why := open("2001:db8:0:ff::1"); why != "addr" {
		t.Fatalf("connection over the /56's cap of %d: %q, want addr", perWide, why)
	}
	// Another /56 is another site.
	if why := open("2001:db8:0:100::1"); why != "" {
		t.Fatalf("a connection from another /56 refused: %s", why)
	}
	// Closing one from the full /64 frees a slot in it and in its /56.
	g.close(key("2001:db8:0:1::1"))
	if why := open("2001:db8:0:1::abcd"); why != "" {
		t.Fatalf("after a close, a connection from the /64: %q", why)
	}
}

// TestIPv6ConnCaps checks the WebSocket caps (max_connections_per_ip) for
// IPv6: per /64, and four times that per /56.
func TestIPv6ConnCaps(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConnsPerIP = 2
	l := newAddrLimits(&cfg)
	key := func(addr string) clientaddr.Key { return clientaddr.Of("[" + addr + "]:4000") }
	for i, tc := range []struct {
		addr string
		want bool
	}{
		{"2001:db8:0:1::1", true},
		{"2001:db8:0:1::2", true},
		{"2001:db8:0:1::3", false}, // the /64's 2
		{"2001:db8:0:2::1", true},
		{"2001:db8:0:2::2", true},
		{"2001:db8:0:3::1", true},
		{"2001:db8:0:3::2", true},
		{"2001:db8:0:4::1", true},
		{"2001:db8:0:4::2", true}, // the /56's 8
		{"2001:db8:0:5::1", false},
		{"2001:db8:0:100::1", true}, // another /56
	} {
		if got := l.openConn(key(tc.addr)); got != tc.want {
			t.Fatalf("connection %d from %s: admitted %v, want %v", i, tc.addr, got, tc.want)
		}
	}
	l.closeConn(key("2001:db8:0:2::1"))
	if !l.openConn(key("2001:db8:0:5::1")) {
		t.Fatal("after a close, the /56 is still full")
	}
}

// TestPingLiveness checks that a connection that has spoken but no longer
// answers pings is closed after three intervals, and that one that answers
// them stays open however long it is silent.
func TestPingLiveness(t *testing.T) {
	const interval = 50 * time.Millisecond
	tr := newTestRelay(t, func(c *Config) { c.PingInterval = interval })
	alive, dead := tr.dial(), tr.dial()
	for _, c := range []*client{alive, dead} {
		if _, closed := c.req("s", `{"limit":0}`); closed != "" {
			t.Fatal(closed)
		}
	}
	// alive reads, and gorilla answers each ping with a pong as it
	// reads; dead's pings are dropped unanswered.
	stop := make(chan struct{})
	aliveErr := make(chan error, 1)
	go func() {
		// Owned by the test: ends at stop or when alive's read fails.
		for {
			alive.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, _, err := alive.ws.ReadMessage(); err != nil {
				select {
				case <-stop:
					aliveErr <- nil
				default:
					aliveErr <- err
				}
				return
			}
		}
	}()
	// dead is closed by the relay: reading drains what was queued, then
	// fails without waiting for the deadline.
	dead.ws.SetPingHandler(func(string) error { return nil })
	dead.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := dead.ws.ReadMessage(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("a connection that answers no ping was not closed")
			}
			break
		}
	}
	// By now dead went three intervals without a pong; alive, silent
	// as long, must still be served.
	if err := alive.ws.WriteMessage(1, []byte(`["REQ","again",{"limit":0}]`)); err != nil {
		t.Fatalf("the connection that answers pings was closed: %v", err)
	}
	close(stop)
	alive.ws.SetReadDeadline(time.Now())
	if err := <-aliveErr; err != nil {
		t.Fatalf("the connection that answers pings was closed: %v", err)
	}
}

// TestBufferedBytesCap checks max_buffered_bytes: a client that asks for
// more stored results than it reads fills its share of the cap, and its
// REQ is cut short with CLOSED rate-limited, while another client is
// served as usual, and the slow client still gets every OK.
func TestBufferedBytesCap(t *testing.T) {
	tr := newTestRelay(t, func(c *Config) { c.MaxBufferedBytes = 64 << 10 })
	k, _ := nostr.GenerateSecretKey()
	pub := tr.dial()
	content := strings.Repeat("x", 30<<10)
	for i := range 200 {
		if ok, msg := pub.publish(signed(t, k, 1, nil, fmt.Sprint(i, content))); !ok {
			t.Fatal(msg)
		}
	}
	// The slow client's socket takes little, so what it does not read
	// stays in the relay's send queue.
	d := *tr.dialer
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(4096)
		}
		return c, err
	}
	ws, _, err := d.Dial(tr.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	slow := &client{t: t, ws: ws}
	slow.read() // AUTH
	slow.send("REQ", "all", map[string]any{"limit": 500})
	// Another client is served while the slow one's queue is full.
	other := tr.dial()
	if ids, closed := other.req("one", `{"limit":1}`); len(ids) != 1 || closed != "" {
		t.Fatalf("another client's REQ: %d events, %q", len(ids), closed)
	}
	if ok, msg := other.publish(signed(t, k, 1, nil, "still served")); !ok {
		t.Fatal(msg)
	}
	// The slow client reads at last: some of the results, then CLOSED.
	got := 0
	for {
		m := slow.read()
		if len(m) < 2 || m[1] != "all" {
			continue
		}
		if m[0] == "EVENT" {
			got++
			continue
		}
		if m[0] != "CLOSED" || !strings.HasPrefix(m[2].(string), "rate-limited:") {
			t.Fatalf("after %d events: %v, want CLOSED rate-limited", got, m)
		}
		break
	}
	if got >= 200 {
		t.Fatalf("all %d events were queued despite the cap", got)
	}
	// Replies are never refused for the cap: the slow client's OK comes.
	if ok, msg := slow.publish(signed(t, k, 1, nil, "slow but acknowledged")); !ok {
		t.Fatal(msg)
	}
}

// TestEOSEPastBufferShare runs a REQ on a connection whose writer takes
// nothing off its queue, so that its results stay buffered, and checks
// that the answer still ends: with EOSE when every result was queued,
// with CLOSED when the buffer cap refused one. Its last result may push
// the queue over its share of the cap; EOSE is a reply and must not be
// refused for that, or the client waits for it forever.
func TestEOSEPastBufferShare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events int
		end    string
	}{
		{"the last result passes the share", 3, "EOSE"},
		{"a result is refused", 5, "CLOSED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRelay(t, func(c *Config) { c.MaxBufferedBytes = 64 << 10 })
			k, _ := nostr.GenerateSecretKey()
			pub := tr.dial()
			content := strings.Repeat("x", 30<<10)
			for i := range tc.events {
				if ok, msg := pub.publish(signed(t, k, 1, nil, fmt.Sprint(i, content))); !ok {
					t.Fatal(msg)
				}
			}
			// A connection with no writer: nothing leaves its queue.
			c := newConn(tr.r, nil, clientaddr.Key{}, "")
			defer c.cancel()
			c.handleReq(&nostr.ClientMessage{Type: "REQ", SubID: "s", Filters: []nostr.Filter{{Limit: 10, HasLimit: true}}})
			c.handlers.Wait()
			var got []string
			for len(c.send) > 0 {
				var m []any
				if err := json.Unmarshal(c.took(<-c.send), &m); err != nil {
					t.Fatal(err)
				}
				got = append(got, m[0].(string))
			}
			if len(got) < 2 || got[len(got)-1] != tc.end || got[len(got)-2] != "EVENT" {
				t.Fatalf("the REQ's answer: %v, want EVENTs then %s", got, tc.end)
			}
		})
	}
}
