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

// read returns the next relay message: its type and its elements.
func (c *conn) read() (string, []json.RawMessage, error) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return "", nil, err
		}
		var m []json.RawMessage
		var typ string
		if json.Unmarshal(data, &m) != nil || len(m) == 0 || json.Unmarshal(m[0], &typ) != nil {
			continue // not a relay message; a relay may send anything
		}
		return typ, m, nil
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
		typ, m, err := c.read()
		if err != nil {
			return fmt.Errorf("announce: %s sent no OK: %w", url, err)
		}
		var id, msg string
		var ok bool
		if typ != "OK" || len(m) < 3 || json.Unmarshal(m[1], &id) != nil || id != ev.IDHex() {
			continue
		}
		if json.Unmarshal(m[2], &ok) == nil && ok {
			return nil
		}
		if len(m) > 3 {
			json.Unmarshal(m[3], &msg)
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
		typ, m, err := c.read()
		if err != nil {
			return out, fmt.Errorf("announce: %s sent no EOSE: %w", url, err)
		}
		var id string
		if len(m) < 2 || json.Unmarshal(m[1], &id) != nil || id != sub {
			continue
		}
		switch typ {
		case "EVENT":
			if len(m) >= 3 && len(out) < max {
				out = append(out, m[2])
			}
		case "EOSE":
			c.send("CLOSE", sub)
			return out, nil
		case "CLOSED":
			var msg string
			if len(m) > 2 {
				json.Unmarshal(m[2], &msg)
			}
			return out, fmt.Errorf("announce: %s: %w: %q", url, errClosed, msg)
		}
	}
}
