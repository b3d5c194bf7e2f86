package announce

import (
	"context"
	"encoding/json"
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

func (c *conn) send(v ...any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// relayMsg is one relay-to-client message (NIP-01): its type, its second
// element when that is a string (a subscription or event id), and the
// elements after it.
type relayMsg struct {
	typ, first string
	rest       []json.RawMessage
}

// parseRelayMsg decodes a relay message; ok is false for anything that is
// not a JSON array starting with a string type.
func parseRelayMsg(data []byte) (m relayMsg, ok bool) {
	var arr []json.RawMessage
	if json.Unmarshal(data, &arr) != nil || len(arr) == 0 || json.Unmarshal(arr[0], &m.typ) != nil {
		return relayMsg{}, false
	}
	if len(arr) > 1 {
		json.Unmarshal(arr[1], &m.first)
		m.rest = arr[2:]
	}
	return m, true
}

// read returns the next relay message, skipping frames that are none: a
// relay may send anything.
func (c *conn) read() (relayMsg, error) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return relayMsg{}, err
		}
		if m, ok := parseRelayMsg(data); ok {
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
	if err := c.send("EVENT", ev); err != nil {
		return fmt.Errorf("announce: send to %s: %w", url, err)
	}
	for {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("announce: %s sent no OK: %w", url, err)
		}
		if m.typ != "OK" || m.first != ev.IDHex() || len(m.rest) == 0 {
			continue
		}
		var ok bool
		if json.Unmarshal(m.rest[0], &ok) == nil && ok {
			return nil
		}
		var msg string
		if len(m.rest) > 1 {
			json.Unmarshal(m.rest[1], &msg)
		}
		return fmt.Errorf("announce: %s refused the announcement: %q", url, msg)
	}
}

// errClosed is a relay's CLOSED for the query.
var errClosed = errors.New("relay closed the subscription")

// query sends one REQ and collects the raw events until EOSE, at most max.
func query(ctx context.Context, url string, filter map[string]any, max int) ([]json.RawMessage, error) {
	c, closeConn, err := dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	const sub = "fleetmesh-join"
	if err := c.send("REQ", sub, filter); err != nil {
		return nil, fmt.Errorf("announce: send to %s: %w", url, err)
	}
	var out []json.RawMessage
	for {
		m, err := c.read()
		if err != nil {
			return out, fmt.Errorf("announce: %s sent no EOSE: %w", url, err)
		}
		if m.first != sub {
			continue
		}
		switch m.typ {
		case "EVENT":
			if len(m.rest) > 0 && len(out) < max {
				out = append(out, m.rest[0])
			}
		case "EOSE":
			c.send("CLOSE", sub)
			return out, nil
		case "CLOSED":
			var msg string
			if len(m.rest) > 0 {
				json.Unmarshal(m.rest[0], &msg)
			}
			return out, fmt.Errorf("announce: %s: %w: %q", url, errClosed, msg)
		}
	}
}
