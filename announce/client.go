package announce

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
)

// conn is one WebSocket to a relay, used by one goroutine for one
// exchange and then closed.
type conn struct {
	ws *websocket.Conn
}

// dial opens a WebSocket to url; the connection is closed when ctx ends,
// which ends any read or write in progress.
func dial(ctx context.Context, url string) (*conn, func(), error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 4096, WriteBufferSize: 4096}
	ws, resp, err := d.DialContext(ctx, url, http.Header{})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("announce: connect to %s: %w", url, err)
	}
	ws.SetReadLimit(MaxEventBytes + 1024)
	stop := context.AfterFunc(ctx, func() { ws.NetConn().Close() })
	return &conn{ws: ws}, func() { stop(); ws.Close() }, nil
}

func (c *conn) send(m nostr.ClientMessage) error {
	return c.ws.WriteMessage(websocket.TextMessage, m.AppendJSON(nil))
}

// read returns the next relay message, skipping frames that are none a
// client knows: a relay may send anything (NIP-01 lets it add types).
func (c *conn) read() (*nostr.RelayMessage, error) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return nil, err
		}
		if m, err := nostr.ParseRelayMessage(data); err == nil {
			return m, nil
		}
	}
}

// publish sends ev to the relay at url and waits for its OK.
func publish(ctx context.Context, url string, ev *nostr.Event) error {
	c, closeConn, err := dial(ctx, url)
	if err != nil {
		return err
	}
	defer closeConn()
	if err := c.send(nostr.ClientMessage{Type: nostr.MsgEvent, Event: ev}); err != nil {
		return fmt.Errorf("announce: send to %s: %w", url, err)
	}
	for {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("announce: %s sent no OK: %w", url, err)
		}
		if m.Type != nostr.MsgOK || m.EventID != ev.ID {
			continue
		}
		if m.OK {
			return nil
		}
		return fmt.Errorf("announce: %s refused the announcement: %q", url, m.Text)
	}
}

// errClosed is a relay's CLOSED for the query.
var errClosed = errors.New("relay closed the subscription")

// query sends one REQ for f and collects the events until EOSE, at most
// max.
func query(ctx context.Context, url string, f nostr.Filter, max int) ([]*nostr.Event, error) {
	c, closeConn, err := dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	const sub = "fleetmesh-join"
	if err := c.send(nostr.ClientMessage{Type: nostr.MsgReq, SubID: sub, Filters: []nostr.Filter{f}}); err != nil {
		return nil, fmt.Errorf("announce: send to %s: %w", url, err)
	}
	var out []*nostr.Event
	for {
		m, err := c.read()
		if err != nil {
			return out, fmt.Errorf("announce: %s sent no EOSE: %w", url, err)
		}
		if m.SubID != sub {
			continue
		}
		switch m.Type {
		case nostr.MsgEvent:
			if len(out) < max {
				out = append(out, m.Event)
			}
		case nostr.MsgEOSE:
			c.send(nostr.ClientMessage{Type: nostr.MsgClose, SubID: sub})
			return out, nil
		case nostr.MsgClosed:
			return out, fmt.Errorf("announce: %s: %w: %q", url, errClosed, m.Text)
		}
	}
}
