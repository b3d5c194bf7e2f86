package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestMaxConnectionsPerIP checks that a connection over
// max_connections_per_ip is refused at the upgrade with HTTP 429, and that
// a slot frees when a connection closes.
func TestMaxConnectionsPerIP(t *testing.T) {
	n := startNode(t, newHome(t, nodeConfig(map[string]string{"max_connections_per_ip": "2"})))
	ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
	defer cancel()
	var open []*websocket.Conn
	for i := 0; i < 2; i++ {
		c, err := dial(ctx, n.url)
		if err != nil {
			t.Fatalf("connection %d within the limit: %v", i, err)
		}
		open = append(open, c)
	}
	c, res, err := websocket.DefaultDialer.DialContext(ctx, n.url, nil)
	if err == nil {
		c.Close()
		t.Fatal("a third connection from the same IP was accepted with max_connections_per_ip = 2")
	}
	if !errors.Is(err, websocket.ErrBadHandshake) || res == nil || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third connection: err %v, response %v; want HTTP 429", err, res)
	}
	open[0].Close()
	// The relay notices the close asynchronously: poll for the freed slot.
	var again *websocket.Conn
	for again == nil && ctx.Err() == nil {
		if again, _, err = websocket.DefaultDialer.DialContext(ctx, n.url, nil); err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if again == nil {
		t.Fatalf("no slot after closing a connection: %v", err)
	}
	again.Close()
	open[1].Close()
}
