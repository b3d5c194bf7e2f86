package relay

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

// served is one call of the Served hook.
type served struct {
	party string
	sent  bool
	n     int
}

// TestIdentifyAndServed: a connection the Identify hook names has every
// event it is sent (stored answers and live ones) and every event it
// publishes that is accepted told to Served, with the event's JSON bytes;
// an anonymous connection has none; a refused upgrade gets the hook's
// answer and no connection.
func TestIdentifyAndServed(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EventsPerSecond, cfg.IPEventsPerSecond = 0, 0
	r := New(cfg, st, nil, nil)
	var mu sync.Mutex
	var calls []served
	r.Identify = func(w http.ResponseWriter, req *http.Request) (string, bool) {
		p := req.Header.Get("X-Party")
		if p == "refused" {
			http.Error(w, "invalid: not you", http.StatusUnauthorized)
			return "", false
		}
		return p, true
	}
	r.Served = func(party string, sent bool, n int) {
		mu.Lock()
		calls = append(calls, served{party, sent, n})
		mu.Unlock()
	}
	srv := startServer(r, (*Relay).Listener, false)
	t.Cleanup(func() {
		r.Shutdown(context.Background())
		srv.Close()
		st.Close()
	})
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	dial := func(party string) *client {
		h := http.Header{}
		if party != "" {
			h.Set("X-Party", party)
		}
		ws, resp, err := websocket.DefaultDialer.Dial(url, h)
		if party == "refused" {
			if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("refused upgrade: %v %v", err, resp)
			}
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		c := &client{t: t, ws: ws}
		c.read() // AUTH
		return c
	}
	dial("refused")
	leaf, anon := dial("did:key:leaf"), dial("")
	k, _ := nostr.GenerateSecretKey()
	size := func(ev *nostr.Event) int { return len(ev.AppendJSON(nil)) }

	// The leaf's live subscription, then two events: one published by the
	// leaf (accepted, and live to it), one by the anonymous client.
	leaf.send("REQ", "live", map[string]any{"kinds": []int{7}, "limit": 0})
	if m := leaf.read(); m[0] != "EOSE" {
		t.Fatalf("want EOSE, got %v", m)
	}
	mine := signed(t, k, 7, nil, "from the leaf")
	if ok, msg := leaf.publish(mine); !ok {
		t.Fatalf("leaf publish: %s", msg)
	}
	theirs := signed(t, k, 7, nil, "from someone else, somewhat longer")
	if ok, msg := anon.publish(theirs); !ok {
		t.Fatalf("anonymous publish: %s", msg)
	}
	for got := 0; got < 1; {
		if m := leaf.read(); m[0] == "EVENT" && m[1] == "live" && m[2].(map[string]any)["id"] == theirs.IDHex() {
			got++
		}
	}
	leaf.send("CLOSE", "live")
	if ids, _ := leaf.req("stored-sub", `{"kinds":[7]}`); len(ids) != 2 {
		t.Fatalf("stored answer: %v", ids)
	}
	if ids, _ := anon.req("anon", `{"kinds":[7]}`); len(ids) != 2 {
		t.Fatalf("anonymous stored answer: %v", ids)
	}
	// A refused event is not counted.
	bad := *mine
	bad.Content = "tampered"
	if ok, _ := leaf.publish(&bad); ok {
		t.Fatal("tampered event accepted")
	}
	mu.Lock()
	defer mu.Unlock()
	var gave, took []int
	for _, c := range calls {
		if c.party != "did:key:leaf" {
			t.Fatalf("Served told of party %q", c.party)
		}
		if c.sent {
			gave = append(gave, c.n)
		} else {
			took = append(took, c.n)
		}
	}
	// Sent to the leaf: its own event live, the other live, and both
	// stored (the order of the live pair is the broadcast's).
	if len(gave) != 4 || gave[2]+gave[3] != size(mine)+size(theirs) || gave[0]+gave[1] != size(mine)+size(theirs) {
		t.Fatalf("sent to the leaf: %v, want the two events' sizes %d and %d twice", gave, size(mine), size(theirs))
	}
	if len(took) != 1 || took[0] != size(mine) {
		t.Fatalf("accepted from the leaf: %v, want [%d]", took, size(mine))
	}
}
