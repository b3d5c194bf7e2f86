package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
)

// seedIP is where the store is seeded from: an address of its own, so the
// seeding spends no attacker's or honest client's allowance.
const seedIP = "127.0.0.9"

// seedStore is not an attack: it publishes t.seed events, pipelined on one
// connection, so that broad filters and NEG-OPEN have a store to scan. It
// runs here, outside the tests' race detector, because signing is most of
// its cost.
func seedStore(ctx context.Context, t target) result {
	c, _, err := dialFrom(ctx, t.relay, seedIP)
	if err != nil {
		return result{Got: "dial: " + err.Error()}
	}
	defer c.Close()
	k, err := nostr.GenerateSecretKey()
	if err != nil {
		return result{Got: err.Error()}
	}
	now := time.Now().Unix()
	go func() {
		// Owned by seedStore: ends when c closes or all are sent.
		for i := range t.seed {
			ev := &nostr.Event{CreatedAt: now - int64(t.seed-i), Kind: 1, Tags: nostr.Tags{}, Content: fmt.Sprint("seed ", i)}
			if k.Sign(ev) != nil {
				return
			}
			msg := append(append([]byte(`["EVENT",`), ev.AppendJSON(nil)...), ']')
			if c.WriteMessage(websocket.TextMessage, msg) != nil {
				return
			}
		}
	}()
	var accepted, refused int64
	first := ""
	for accepted+refused < int64(t.seed) && ctx.Err() == nil {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := c.ReadMessage()
		if err != nil {
			break
		}
		switch {
		case strings.HasPrefix(string(data), `["OK",`) && strings.Contains(string(data), `,true,`):
			accepted++
		case strings.HasPrefix(string(data), `["OK",`):
			refused++
			if first == "" {
				first = string(data)
			}
		}
	}
	return result{
		Got:    fmt.Sprintf("%d of %d events stored, %d refused (first: %s)", accepted, t.seed, refused, first),
		Counts: map[string]int64{"accepted": accepted},
	}
}
