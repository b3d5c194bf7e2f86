package conformance

import (
	"context"
	"errors"
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

func (c *client) send(m nostr.ClientMessage) error { return c.sendRaw(m.AppendJSON(nil)) }

// next reads messages until want returns true for one, or time runs out.
// Messages of types NIP-01 does not define are skipped, as NIP-01 lets
// relays add types; a malformed message of a known type is an error, as
// it would break any client.
func (c *client) next(want func(m *nostr.RelayMessage) bool) (*nostr.RelayMessage, error) {
	deadline := time.Now().Add(c.timeout)
	for {
		c.ws.SetReadDeadline(deadline)
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return nil, fmt.Errorf("no answer from the relay: %w", err)
		}
		m, err := nostr.ParseRelayMessage(data)
		if errors.Is(err, nostr.ErrUnknownType) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("relay sent a malformed message %.200q: %w", data, err)
		}
		if want(m) {
			return m, nil
		}
	}
}

// publish sends an event and returns the relay's OK.
func (c *client) publish(ev *nostr.Event) (ok bool, msg string, err error) {
	if err := c.send(nostr.ClientMessage{Type: nostr.MsgEvent, Event: ev}); err != nil {
		return false, "", err
	}
	m, err := c.next(func(m *nostr.RelayMessage) bool {
		return m.Type == nostr.MsgOK && m.EventID == ev.ID
	})
	if err != nil {
		return false, "", fmt.Errorf("no OK for event %s: %w", ev.IDHex()[:8], err)
	}
	return m.OK, m.Text, nil
}

// query sends a REQ and collects stored events until EOSE. A CLOSED is
// returned as an error with the relay's reason.
func (c *client) query(sub string, filters ...nostr.Filter) ([]*nostr.Event, error) {
	if err := c.send(nostr.ClientMessage{Type: nostr.MsgReq, SubID: sub, Filters: filters}); err != nil {
		return nil, err
	}
	var out []*nostr.Event
	for {
		m, err := c.next(func(m *nostr.RelayMessage) bool {
			return m.SubID == sub && (m.Type == nostr.MsgEvent || m.Type == nostr.MsgEOSE || m.Type == nostr.MsgClosed)
		})
		if err != nil {
			return out, fmt.Errorf("REQ %s: %w", sub, err)
		}
		switch m.Type {
		case nostr.MsgEOSE:
			return out, nil
		case nostr.MsgClosed:
			return out, fmt.Errorf("REQ %s closed: %s", sub, m.Text)
		}
		if err := m.Event.Verify(); err != nil {
			return out, fmt.Errorf("REQ %s: relay sent event %s that does not verify: %w", sub, m.Event.IDHex()[:8], err)
		}
		out = append(out, m.Event)
	}
}
