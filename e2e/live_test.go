package e2e

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestLiveAndStoredHaveNoGap opens a subscription while several clients are
// publishing. Every acknowledged event must reach it, either in the stored
// part before EOSE or live after it: an event saved between the store
// query and the live registration would otherwise be lost to the client.
func TestLiveAndStoredHaveNoGap(t *testing.T) {
	home := newHome(t, nodeConfig(map[string]string{"max_limit": "1000000"}))
	n := startNode(t, home)
	acks := &ackLog{ids: map[string]bool{}, refused: map[string]int{}}
	tag := randomContent("gap")[4:]
	ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
	defer cancel()
	pubCtx, stopPublishing := context.WithCancel(ctx)
	waitPublishers := publishers(pubCtx, t, n.url, acks, func(u *user) (*event, error) {
		return u.sign(1, randomContent("gap"), [][]string{{"t", tag}})
	})
	waitForAcks(t, n, acks)

	sub, err := dial(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	req, _ := json.Marshal([]any{"REQ", "all", map[string]any{"#t": []string{tag}, "limit": 1000000}})
	if err := sub.WriteMessage(websocket.TextMessage, req); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	eose := false
	readerDone := make(chan struct{})
	go func() {
		// Owned by the test: ends when sub is closed.
		defer close(readerDone)
		for {
			_, data, err := sub.ReadMessage()
			if err != nil {
				return
			}
			var msg []json.RawMessage
			if json.Unmarshal(data, &msg) != nil || len(msg) < 2 {
				continue
			}
			var typ string
			json.Unmarshal(msg[0], &typ)
			mu.Lock()
			switch typ {
			case "EVENT":
				var e event
				if len(msg) >= 3 && json.Unmarshal(msg[2], &e) == nil {
					seen[e.ID] = true
				}
			case "EOSE":
				eose = true
			}
			mu.Unlock()
		}
	}()
	defer func() { sub.Close(); <-readerDone }()

	// Keep publishing well past the REQ, then stop and wait for delivery.
	for acks.fresh() < 10*crashMinAcked && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stopPublishing()
	waitPublishers()
	ids := acks.snapshot()
	missing := func() int {
		mu.Lock()
		defer mu.Unlock()
		m := 0
		for _, id := range ids {
			if !seen[id] {
				m++
			}
		}
		return m
	}
	deadline := time.Now().Add(crashPhaseBudget / 2)
	for missing() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	gotEOSE := eose
	mu.Unlock()
	if !gotEOSE {
		t.Error("no EOSE for the subscription")
	}
	if m := missing(); m > 0 {
		t.Fatalf("%d of %d acknowledged events never reached a subscription opened while they were published", m, len(ids))
	}
	t.Logf("%d acknowledged events all reached the subscription", len(ids))
}
