package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gorilla/websocket"
)

// TestGracefulShutdownKeepsAcknowledged stops the node with SIGTERM while a
// client's events are still in flight, and checks that it exits cleanly and
// that every event it acknowledged is served after a restart.
func TestGracefulShutdownKeepsAcknowledged(t *testing.T) {
	home := newHome(t, nodeConfig(nil))
	n := startNode(t, home)
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
	defer cancel()
	c, err := dial(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	const count = 200
	sent := make(map[string]bool, count)
	for i := 0; i < count; i++ {
		e, err := u.sign(1, randomContent("sigterm"), nil)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := json.Marshal([]any{"EVENT", e})
		if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
			t.Fatal(err)
		}
		sent[e.ID] = true
	}
	var acked []string
	stopped := make(chan error, 1)
	for len(acked) < count {
		_, data, err := c.ReadMessage()
		if err != nil {
			break // the node closed the connection while shutting down
		}
		m, ok := parseOK(data)
		if !ok {
			continue
		}
		if !sent[m.ID] {
			t.Fatalf("OK for an id never sent: %+v", m)
		}
		if m.Accepted {
			acked = append(acked, m.ID)
		}
		if len(acked) == count/4 {
			go func() { stopped <- n.stop() }()
		}
	}
	c.Close()
	if len(acked) < count/4 {
		t.Fatalf("only %d events acknowledged before SIGTERM\n%s", len(acked), n.output())
	}
	if err := <-stopped; err != nil {
		t.Fatalf("SIGTERM: exit %v\n%s", err, n.output())
	}
	t.Logf("%d of %d events acknowledged before the connection closed", len(acked), count)
	n = startNode(t, home)
	found, err := fetchIDs(ctx, n.url, acked, crashFetchChunk)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != len(acked) {
		t.Fatalf("%d of %d acknowledged events served after a graceful restart", len(found), len(acked))
	}
}
