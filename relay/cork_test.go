package relay

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// countingConn counts the writes that reach the connection below a
// corkConn. While the test holds gate, writes wait for it.
type countingConn struct {
	net.Conn
	gate   sync.Mutex
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	// Taking and releasing gate is the wait: the test holds it to stall
	// writes.
	c.gate.Lock()
	//lint:ignore SA2001 the critical section is empty on purpose (above)
	c.gate.Unlock()
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// countingListener hands the test each accepted connection as a
// countingConn.
type countingListener struct {
	net.Listener
	accepted chan *countingConn
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: c}
	l.accepted <- cc
	return cc, nil
}

// serveCounted serves a relay through Relay.Listener on top of a
// countingListener, whose connections arrive on the returned channel.
func serveCounted(t *testing.T) (*testRelay, chan *countingConn) {
	t.Helper()
	accepted := make(chan *countingConn, 4)
	tr := serveTestRelay(t, nil, func(r *Relay, ln net.Listener) net.Listener {
		return r.Listener(countingListener{Listener: ln, accepted: accepted})
	}, false)
	return tr, accepted
}

// onlyConn is the relay's one client connection.
func (tr *testRelay) onlyConn() *conn {
	tr.t.Helper()
	tr.r.mu.RLock()
	defer tr.r.mu.RUnlock()
	if len(tr.r.conns) != 1 {
		tr.t.Fatalf("relay has %d connections, want 1", len(tr.r.conns))
	}
	for c := range tr.r.conns {
		return c
	}
	return nil
}

func TestCorkConn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cork       bool
		writes     []string
		peerGone   bool
		wantWrites int64
		wantErr    bool
	}{
		{name: "uncorked writes pass through", writes: []string{"a", "bc"}, wantWrites: 2},
		{name: "corked writes go out as one", cork: true, writes: []string{"a", "bc", "def"}, wantWrites: 1},
		{name: "uncork with nothing collected writes nothing", cork: true},
		{name: "a failed flush is an error", cork: true, writes: []string{"a"}, peerGone: true, wantWrites: 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			under := &countingConn{Conn: a}
			cc := &corkConn{Conn: under, bufs: &sync.Pool{New: func() any { return new([]byte) }}}
			got := make(chan string, 1)
			if tc.peerGone {
				b.Close()
			} else {
				go func() {
					data, _ := io.ReadAll(b)
					got <- string(data)
				}()
			}
			if tc.cork {
				cc.cork()
			}
			for _, w := range tc.writes {
				if _, err := cc.Write([]byte(w)); err != nil {
					t.Fatalf("write %q: %v", w, err)
				}
			}
			var err error
			if tc.cork {
				err = cc.uncork()
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("uncork: %v, want error %v", err, tc.wantErr)
			}
			if n := under.writes.Load(); n != tc.wantWrites {
				t.Fatalf("%d writes reached the connection, want %d", n, tc.wantWrites)
			}
			a.Close()
			if !tc.peerGone {
				if data, want := <-got, strings.Join(tc.writes, ""); data != want {
					t.Fatalf("peer read %q, want %q", data, want)
				}
			}
		})
	}
}

// TestRepliesThroughListeners pipelines EVENTs and then asks for them back
// on a relay served directly, through Relay.Listener, and through
// Relay.Listener under TLS (where gorilla holds the TLS conn, so the
// writer cannot cork): every way, each EVENT gets one OK and the REQ's
// burst of EVENTs arrives in the store's order, then EOSE.
func TestRepliesThroughListeners(t *testing.T) {
	const n = 200
	k, _ := nostr.GenerateSecretKey()
	base := time.Now().Unix() - n
	evs := make([]*nostr.Event, n)
	for i := range evs {
		evs[i] = &nostr.Event{CreatedAt: base + int64(i), Kind: 1, Tags: nostr.Tags{}, Content: fmt.Sprint("note ", i)}
		if err := k.Sign(evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		wrap   func(*Relay, net.Listener) net.Listener
		useTLS bool
	}{
		{name: "plain"},
		{name: "corked", wrap: (*Relay).Listener},
		{name: "corked under TLS", wrap: (*Relay).Listener, useTLS: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := serveTestRelay(t, nil, tc.wrap, tc.useTLS)
			c := tr.dial()
			for _, ev := range evs {
				c.sendRaw(`["EVENT",` + string(ev.AppendJSON(nil)) + `]`)
			}
			oks := map[string]int{}
			for range n {
				m := c.read()
				if m[0] != "OK" || m[2] != true {
					t.Fatalf("relay sent %v, want OK true", m)
				}
				oks[m[1].(string)]++
			}
			for _, ev := range evs {
				if oks[ev.IDHex()] != 1 {
					t.Fatalf("event %s got %d OKs, want 1", ev.IDHex(), oks[ev.IDHex()])
				}
			}
			ids, closed := c.req("all", `{}`)
			if closed != "" || len(ids) != n {
				t.Fatalf("REQ returned %d events (closed %q), want %d", len(ids), closed, n)
			}
			for i, id := range ids {
				if want := evs[n-1-i].IDHex(); id != want {
					t.Fatalf("REQ event %d is %s, want %s (newest first)", i, id, want)
				}
			}
		})
	}
}

// TestWriterCoalescesQueued holds the connection's first write until many
// messages are queued behind it, then checks they reached the kernel in a
// few writes, in order.
func TestWriterCoalescesQueued(t *testing.T) {
	const n = 100
	tr, accepted := serveCounted(t)
	c := tr.dial()
	under := <-accepted
	sc := tr.onlyConn()
	under.gate.Lock()
	before := under.writes.Load()
	for i := range n {
		sc.sendCtl(encode(nostr.RelayMessage{Type: nostr.MsgNotice, Text: fmt.Sprint(i)}))
	}
	under.gate.Unlock()
	for i := range n {
		if m := c.read(); m[0] != "NOTICE" || m[1] != fmt.Sprint(i) {
			t.Fatalf("message %d is %v, want NOTICE %d", i, m, i)
		}
	}
	// The writer took the first message, perhaps with a few more, before
	// the test queued the rest; then it was held. Everything after went out
	// in full batches.
	most := 1 + int64((n-1+batchMessages-1)/batchMessages)
	if writes := under.writes.Load() - before; writes > most {
		t.Fatalf("%d messages took %d writes, want at most %d", n, writes, most)
	}
}

// TestWriterFlushesLoneReply checks a corked connection does not hold a
// reply back waiting for company: one EVENT gets its OK with nothing else
// sent.
func TestWriterFlushesLoneReply(t *testing.T) {
	tr, _ := serveCounted(t)
	c := tr.dial()
	if _, ok := tr.onlyConn().ws.UnderlyingConn().(*corkConn); !ok {
		t.Fatal("the relay's connection is not corkable; this test would not test corking")
	}
	k, _ := nostr.GenerateSecretKey()
	if ok, msg := c.publish(signed(t, k, 1, nil, "alone")); !ok {
		t.Fatalf("publish: %q", msg)
	}
}
