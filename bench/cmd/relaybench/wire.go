package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gorilla/websocket"
)

// maxRelayMessage bounds one message the bench accepts from a relay.
const maxRelayMessage = 4 << 20

// dialTimeout bounds one WebSocket handshake.
const dialTimeout = 15 * time.Second

// dial opens a WebSocket to a loopback relay URL.
func dial(ctx context.Context, relayURL string) (*websocket.Conn, error) {
	if err := checkLoopback(relayURL); err != nil {
		return nil, err
	}
	d := websocket.Dialer{HandshakeTimeout: dialTimeout, ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, _, err := d.DialContext(ctx, relayURL, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", relayURL, err)
	}
	c.SetReadLimit(maxRelayMessage)
	return c, nil
}

// frameHead returns the first two JSON strings of a relay message
// (["LABEL","SECOND",...]) without decoding the rest, which keeps the load
// generator's parsing cost tiny next to the relay's. Labels and
// subscription ids and event ids are plain ASCII without escapes in this
// bench, so a head string with an escape, a control or a non-ASCII byte is
// reported as malformed to the caller.
func frameHead(msg []byte) (label, second string, ok bool) {
	i := 0
	skip := func() {
		for i < len(msg) && (msg[i] == ' ' || msg[i] == '\n' || msg[i] == '\r' || msg[i] == '\t') {
			i++
		}
	}
	str := func() (string, bool) {
		skip()
		if i >= len(msg) || msg[i] != '"' {
			return "", false
		}
		i++
		start := i
		for i < len(msg) && msg[i] != '"' {
			if c := msg[i]; c == '\\' || c < 0x20 || c >= 0x80 {
				return "", false
			}
			i++
		}
		if i >= len(msg) {
			return "", false
		}
		s := string(msg[start:i])
		i++
		return s, true
	}
	skip()
	if i >= len(msg) || msg[i] != '[' {
		return "", "", false
	}
	i++
	if label, ok = str(); !ok {
		return "", "", false
	}
	skip()
	if i >= len(msg) || msg[i] != ',' {
		return label, "", true
	}
	i++
	second, _ = str()
	return label, second, true
}
