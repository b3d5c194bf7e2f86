package relay

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/negentropy"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

func TestNIP77Sync(t *testing.T) {
	tr := newTestRelay(t, nil)
	k, _ := nostr.GenerateSecretKey()
	c := tr.dial()
	var mine []negentropy.Item
	relayOnly := map[[32]byte]bool{}
	for i := range 40 {
		ev := signed(t, k, 1, nil, strings.Repeat("x", i))
		ev.CreatedAt -= int64(i)
		k.Sign(ev)
		if i%3 != 0 {
			if ok, msg := c.publish(ev); !ok {
				t.Fatal(msg)
			}
			relayOnly[ev.ID] = true
		}
		if i%2 == 0 {
			mine = append(mine, negentropy.Item{Timestamp: uint64(ev.CreatedAt), ID: ev.ID})
			delete(relayOnly, ev.ID)
		}
	}
	vec, err := negentropy.NewVector(mine)
	if err != nil {
		t.Fatal(err)
	}
	in, err := negentropy.NewInitiator(vec, negentropy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := in.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	c.send("NEG-OPEN", "n", map[string]any{"kinds": []int{1}}, hex.EncodeToString(msg))
	need := map[[32]byte]bool{}
	for rounds := 0; ; rounds++ {
		if rounds > 20 {
			t.Fatal("no convergence")
		}
		m := c.read()
		if m[0] != "NEG-MSG" {
			t.Fatalf("got %v", m)
		}
		raw, _ := hex.DecodeString(m[2].(string))
		step, err := in.Reconcile(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range step.Need {
			need[id] = true
		}
		if step.Done() {
			break
		}
		c.send("NEG-MSG", "n", hex.EncodeToString(step.Next))
	}
	c.send("NEG-CLOSE", "n")
	if len(need) != len(relayOnly) {
		t.Fatalf("need %d ids, relay has %d the client lacks", len(need), len(relayOnly))
	}
	for id := range relayOnly {
		if !need[id] {
			t.Fatalf("missing %x", id)
		}
	}
	c.send("NEG-MSG", "gone", "61")
	if m := c.read(); m[0] != "NEG-ERR" || !strings.HasPrefix(m[2].(string), "closed:") {
		t.Fatalf("NEG-MSG without session: %v", m)
	}
	c.send("NEG-OPEN", "bad", map[string]any{}, "zz")
	if m := c.read(); m[0] != "NEG-ERR" || !strings.HasPrefix(m[2].(string), "invalid:") {
		t.Fatalf("bad hex: %v", m)
	}
}

// TestNegOpenCharged checks that a NEG-OPEN's listing is charged to its
// address: reserved before it runs and settled with the rows it read, so that a second session goes ahead
// but the address's next one, in debt by then, is refused rate-limited.
func TestNegOpenCharged(t *testing.T) {
	// 10 rows a second with a burst of 40; each listing reads 45 rows.
	tr := newTestRelay(t, func(c *Config) { c.IPReqRowsPerSecond, c.MaxNegRecords = 10, 1000 })
	k, _ := nostr.GenerateSecretKey()
	pub := tr.dial()
	for i := range 45 {
		if ok, msg := pub.publish(signed(t, k, 1, nil, fmt.Sprint(i))); !ok {
			t.Fatal(msg)
		}
	}
	open := func(c *client, id string) []any {
		vec, _ := negentropy.NewVector(nil)
		in, _ := negentropy.NewInitiator(vec, negentropy.Config{})
		msg, _ := in.Initiate()
		c.send("NEG-OPEN", id, map[string]any{"kinds": []int{1}}, hex.EncodeToString(msg))
		m := c.read()
		c.send("NEG-CLOSE", id)
		return m
	}
	c := tr.dial()
	// The first leaves the address 5 rows in debt: its reservation (of
	// 1,001 rows, as far as a second of debt) settled to the 45 it read.
	// Had the reservation not been given back, the second would wait.
	for _, id := range []string{"a", "b"} {
		if m := open(c, id); m[0] != "NEG-MSG" {
			t.Fatalf("NEG-OPEN %s: %v", id, m)
		}
	}
	// Now 45 rows in debt: 4.5 s, over the 2 s a request may wait.
	if m := open(tr.dial(), "c"); m[0] != "NEG-ERR" || !strings.HasPrefix(m[2].(string), "rate-limited:") {
		t.Fatalf("third NEG-OPEN from the address: %v, want NEG-ERR rate-limited", m)
	}
}

// BenchmarkNegOpen measures a NEG-OPEN over a whole store (the hostile
// suite's NEG-OPEN loop) to its first NEG-MSG: listing every event's
// (created_at, id), building the vector and the first reply. The work
// budgets are lifted so that the listing, not the budget, is measured.
// For figures, run with a store of 20,000:
//
//	go test -run '^$' -bench NegOpen -benchtime 50x ./relay/
func BenchmarkNegOpen(b *testing.B) {
	stored := 20_000
	if testing.Short() {
		stored = 1000
	}
	st, err := store.Open(b.TempDir(), store.Options{SweepEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, ev := range signEvents(b, stored, 200) {
		if _, err := st.Save(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.ReqRowsPerSecond, cfg.IPReqRowsPerSecond = 1<<30, 1<<30
	cfg.ReqMillisPerSecond, cfg.IPReqMillisPerSecond = 1<<20, 1<<20
	r := New(cfg, st, nil, nil)
	srv := startServer(r, (*Relay).Listener, false)
	defer func() {
		r.Shutdown(context.Background())
		srv.Close()
	}()
	ws := benchDial(b, "ws"+strings.TrimPrefix(srv.URL, "http"))
	cpu := cpuTime(b)
	n := 0
	for b.Loop() {
		id := fmt.Sprint("n", n)
		n++
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`["NEG-OPEN","`+id+`",{},"61"]`)); err != nil {
			b.Fatal(err)
		}
		_, msg, err := ws.ReadMessage()
		if err != nil || !strings.HasPrefix(string(msg), `["NEG-MSG","`+id+`"`) {
			b.Fatalf("got %.100s (%v)", msg, err)
		}
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`["NEG-CLOSE","`+id+`"]`)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N*stored), "cpu-ns/record")
}
