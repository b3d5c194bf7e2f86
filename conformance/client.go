package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
)

// client is the smallest NIP-01 client the checks need: it sends frames
// and reads the relay's answers, skipping messages meant for others.
type client struct {
	ws      *websocket.Conn
	timeout time.Duration
}

func dial(ctx context.Context, url string, timeout time.Duration) (*client, error) {
	d := websocket.Dialer{HandshakeTimeout: timeout}
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	return &client{ws: ws, timeout: timeout}, nil
}

func (c *client) close() { c.ws.Close() }

func (c *client) sendRaw(b []byte) error {
	c.ws.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *client) send(v ...any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.sendRaw(b)
}

// next reads messages until want returns true for one, or time runs out.
func (c *client) next(want func(m []json.RawMessage, typ string) bool) ([]json.RawMessage, error) {
	deadline := time.Now().Add(c.timeout)
	for {
		c.ws.SetReadDeadline(deadline)
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return nil, fmt.Errorf("no answer from the relay: %w", err)
		}
		var m []json.RawMessage
		if json.Unmarshal(data, &m) != nil || len(m) == 0 {
			return nil, fmt.Errorf("relay sent a frame that is not a JSON array: %.200q", data)
		}
		var typ string
		json.Unmarshal(m[0], &typ)
		if want(m, typ) {
			return m, nil
		}
	}
}

func str(r json.RawMessage) string {
	var s string
	json.Unmarshal(r, &s)
	return s
}

// publish sends an event and returns the relay's OK.
func (c *client) publish(ev *nostr.Event) (ok bool, msg string, err error) {
	if err := c.sendRaw(append(append([]byte(`["EVENT",`), ev.AppendJSON(nil)...), ']')); err != nil {
		return false, "", err
	}
	id := ev.IDHex()
	m, err := c.next(func(m []json.RawMessage, typ string) bool {
		return typ == "OK" && len(m) >= 4 && str(m[1]) == id
	})
	if err != nil {
		return false, "", fmt.Errorf("no OK for event %s: %w", id[:8], err)
	}
	json.Unmarshal(m[2], &ok)
	return ok, str(m[3]), nil
}

// query sends a REQ and collects stored events until EOSE. A CLOSED is
// returned as an error with the relay's reason.
func (c *client) query(sub string, filters ...map[string]any) ([]*nostr.Event, error) {
	msg := []any{"REQ", sub}
	for _, f := range filters {
		msg = append(msg, f)
	}
	if err := c.send(msg...); err != nil {
		return nil, err
	}
	var out []*nostr.Event
	for {
		m, err := c.next(func(m []json.RawMessage, typ string) bool {
			return len(m) >= 2 && str(m[1]) == sub && (typ == "EVENT" || typ == "EOSE" || typ == "CLOSED")
		})
		if err != nil {
			return out, fmt.Errorf("REQ %s: %w", sub, err)
		}
		switch str(m[0]) {
		case "EOSE":
			return out, nil
		case "CLOSED":
			return out, fmt.Errorf("REQ %s closed: %s", sub, str(m[2]))
		}
		ev := new(nostr.Event)
		if err := json.Unmarshal(m[2], ev); err != nil {
			return out, fmt.Errorf("REQ %s: relay sent an event that does not parse: %w", sub, err)
		}
		if err := ev.Verify(); err != nil {
			return out, fmt.Errorf("REQ %s: relay sent event %s that does not verify: %w", sub, ev.IDHex()[:8], err)
		}
		out = append(out, ev)
	}
}
