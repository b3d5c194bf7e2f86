package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Bounds of the attacks themselves, as in the suite's first version.
const (
	floodConns    = 1200
	floodWorkers  = 64
	slowlorisConn = 1000
)

func dial(ctx context.Context, t target) (*websocket.Conn, *http.Response, error) {
	return dialFrom(ctx, t.relay, t.from)
}

// dialFrom opens a WebSocket to url from the local address ip.
func dialFrom(ctx context.Context, url, ip string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{
		HandshakeTimeout: 10 * time.Second,
		NetDialContext:   (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
	}
	return d.DialContext(ctx, url, nil)
}

// draining dials and reads what the relay sends in a goroutine that ends
// with the connection, handing each message to onMsg (if set).
func draining(ctx context.Context, t target, onMsg func([]byte)) *websocket.Conn {
	c, _, err := dial(ctx, t)
	if err != nil {
		return nil
	}
	go func() {
		// Owned by the connection: ends when it closes.
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if onMsg != nil {
				onMsg(data)
			}
		}
	}()
	return c
}

func connFlood(ctx context.Context, t target) result {
	var mu sync.Mutex
	var held []*websocket.Conn
	refused := map[int]int64{}
	var silent, tried atomic.Int64
	workers(ctx, floodWorkers, func(ctx context.Context, _ int) {
		for tried.Add(1) <= floodConns && ctx.Err() == nil {
			c, res, err := dial(ctx, t)
			mu.Lock()
			switch {
			case err == nil:
				held = append(held, c)
			case res != nil:
				refused[res.StatusCode]++
			default:
				silent.Add(1)
			}
			mu.Unlock()
		}
		<-ctx.Done()
	})
	for _, c := range held {
		c.Close()
	}
	n := min(tried.Load(), floodConns)
	return result{
		Got:    fmt.Sprintf("%d of %d connections (429: %d, 503: %d, closed unanswered: %d)", len(held), n, refused[429], refused[503], silent.Load()),
		Counts: map[string]int64{"held": int64(len(held)), "tried": n},
	}
}

func slowloris(ctx context.Context, t target) result {
	addr := strings.TrimPrefix(t.relay, "ws://")
	var mu sync.Mutex
	var conns []net.Conn
	var tried atomic.Int64
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(t.from)}}
	workers(ctx, 32, func(ctx context.Context, _ int) {
		var mine []net.Conn
		for tried.Add(1) <= slowlorisConn && ctx.Err() == nil {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				continue
			}
			c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"))
			mine = append(mine, c)
		}
		mu.Lock()
		conns = append(conns, mine...)
		mu.Unlock()
		// Trickle a header line a second on each held connection, never
		// ending the request.
		for ctx.Err() == nil {
			pause(ctx, time.Second)
			for _, c := range mine {
				c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				c.Write([]byte("X-Slow: 1\r\n"))
			}
		}
	})
	var open int64
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
		}
		c.Close()
	}
	return result{
		Got:    fmt.Sprintf("%d of %d half-open handshakes still held at the end", open, len(conns)),
		Counts: map[string]int64{"open": open, "dialled": int64(len(conns))},
	}
}

func subFlood(ctx context.Context, t target) result {
	var subs, closed, cut atomic.Int64
	workers(ctx, 64, func(ctx context.Context, w int) {
		c := draining(ctx, t, func(data []byte) {
			if bytes.HasPrefix(data, []byte(`["CLOSED"`)) {
				closed.Add(1)
			}
		})
		if c == nil {
			return
		}
		defer c.Close()
		for i := 0; i < 250 && ctx.Err() == nil; i++ {
			if c.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`["REQ","s%d",{"kinds":[1],"limit":0}]`, i))) != nil {
				cut.Add(1)
				return
			}
			subs.Add(1)
		}
		<-ctx.Done()
	})
	return result{
		Got:    fmt.Sprintf("%d REQs sent on 64 connections, %d refused with CLOSED, %d connections closed by the node", subs.Load(), closed.Load(), cut.Load()),
		Counts: map[string]int64{"reqs": subs.Load(), "closed": closed.Load()},
	}
}

// onConns runs f on n connections at once, each closed when ctx ends
// (which also ends a read f is blocked in). A worker whose connection
// ends before ctx does dials again, as a determined attacker would, so
// that the attack's pressure does not fade as the node closes its
// connections; f returns why its connection ended, and onConns returns
// how many connections it opened and why each ended ("" when ctx did).
func onConns(ctx context.Context, t target, n int, f func(ctx context.Context, c *websocket.Conn) string) (conns int64, ended string) {
	var opened atomic.Int64
	var mu sync.Mutex
	why := map[string]int{}
	workers(ctx, n, func(ctx context.Context, _ int) {
		for ctx.Err() == nil {
			c, _, err := dial(ctx, t)
			if err != nil {
				if ctx.Err() == nil {
					mu.Lock()
					why["dial refused"]++
					mu.Unlock()
					pause(ctx, 200*time.Millisecond)
				}
				continue
			}
			opened.Add(1)
			stop := context.AfterFunc(ctx, func() { c.Close() })
			reason := f(ctx, c)
			stop()
			c.Close()
			if ctx.Err() == nil {
				mu.Lock()
				why[reason]++
				mu.Unlock()
			}
		}
	})
	var parts []string
	for r, k := range why {
		parts = append(parts, fmt.Sprintf("%s: %d", r, k))
	}
	slices.Sort(parts)
	return opened.Load(), strings.Join(parts, ", ")
}

// endedBy says why a read or write error ended a connection's loop.
func endedBy(err error) string {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return fmt.Sprintf("closed by the node (%d)", ce.Code)
	}
	return "connection lost"
}

// cut shortens s to at most n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// stored sends a REQ and reads until its EOSE or CLOSED; it returns the
// events received and the CLOSED reason, if any.
func stored(c *websocket.Conn, sub string, filter string) (int, string, error) {
	if err := c.WriteMessage(websocket.TextMessage, []byte(`["REQ","`+sub+`",`+filter+`]`)); err != nil {
		return 0, "", err
	}
	n := 0
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return n, "", err
		}
		var msg []json.RawMessage
		if json.Unmarshal(data, &msg) != nil || len(msg) < 2 {
			continue
		}
		var typ, id string
		json.Unmarshal(msg[0], &typ)
		json.Unmarshal(msg[1], &id)
		if id != sub {
			continue
		}
		switch typ {
		case "EVENT":
			n++
		case "EOSE":
			return n, "", c.WriteMessage(websocket.TextMessage, []byte(`["CLOSE","`+sub+`"]`))
		case "CLOSED":
			var reason string
			if len(msg) > 2 {
				json.Unmarshal(msg[2], &reason)
			}
			return n, reason, nil
		}
	}
}

func reqLoop(ctx context.Context, t target) result {
	var answered, refused, rows atomic.Int64
	conns, ended := onConns(ctx, t, 8, func(ctx context.Context, c *websocket.Conn) string {
		for i := 0; ctx.Err() == nil; i++ {
			// Everything stored up to two seconds ago: the honest
			// clients' new events match no REQ of the loop, so every
			// event it reads is a stored one the node's row budget
			// charged (a live one would be read but never charged).
			filter := fmt.Sprintf(`{"until":%d,"limit":500}`, time.Now().Unix()-2)
			n, reason, err := stored(c, fmt.Sprint("b", i), filter)
			switch {
			case err != nil:
				return endedBy(err)
			case reason == "":
				answered.Add(1)
				rows.Add(int64(n))
			case strings.HasPrefix(reason, "rate-limited"):
				refused.Add(1)
			default:
				return "closed: " + cut(reason, 60)
			}
		}
		return ""
	})
	return result{
		Got:    fmt.Sprintf("%d broad REQs answered (%d events), %d refused rate-limited, on %d connections%s", answered.Load(), rows.Load(), refused.Load(), conns, endedNote(ended)),
		Counts: map[string]int64{"answered": answered.Load(), "rows": rows.Load(), "refused": refused.Load(), "conns": conns},
	}
}

// endedNote is ended as the tail of a result line, if any connection
// ended before the attack did.
func endedNote(ended string) string {
	if ended == "" {
		return ""
	}
	return " (ended early: " + ended + ")"
}

func negLoop(ctx context.Context, t target) result {
	var opened, refused atomic.Int64
	conns, ended := onConns(ctx, t, 8, func(ctx context.Context, c *websocket.Conn) string {
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprint("n", i)
			// "61" is an initial message of protocol version 1 with no
			// ranges: the relay lists the whole filter to answer it.
			if err := c.WriteMessage(websocket.TextMessage, []byte(`["NEG-OPEN","`+id+`",{},"61"]`)); err != nil {
				return endedBy(err)
			}
			for {
				_, data, err := c.ReadMessage()
				if err != nil {
					return endedBy(err)
				}
				if bytes.HasPrefix(data, []byte(`["NEG-MSG","`+id+`"`)) {
					opened.Add(1)
					break
				}
				if bytes.HasPrefix(data, []byte(`["NEG-ERR","`+id+`"`)) {
					refused.Add(1)
					break
				}
			}
			c.WriteMessage(websocket.TextMessage, []byte(`["NEG-CLOSE","`+id+`"]`))
		}
		return ""
	})
	return result{
		Got:    fmt.Sprintf("%d sessions over all %d+ events opened, %d refused, on %d connections%s", opened.Load(), t.seed, refused.Load(), conns, endedNote(ended)),
		Counts: map[string]int64{"opened": opened.Load(), "refused": refused.Load(), "conns": conns},
	}
}

func frames(ctx context.Context, t target) result {
	big := `["EVENT",{"content":"` + strings.Repeat("x", 200<<10) + `"}]`
	bad := []string{big, `[[[[`, `["EVENT",{"id":"zz"}]`, `["REQ"]`, "\x00\xff", `{"not":"an array"}`}
	var sent, conns atomic.Int64
	workers(ctx, 8, func(ctx context.Context, w int) {
		for ctx.Err() == nil {
			c := draining(ctx, t, nil)
			if c == nil {
				pause(ctx, 10*time.Millisecond)
				continue
			}
			conns.Add(1)
			for i := 0; ctx.Err() == nil; i++ {
				if c.WriteMessage(websocket.TextMessage, []byte(bad[i%len(bad)])) != nil {
					break
				}
				sent.Add(1)
			}
			c.Close()
		}
	})
	return result{
		Got:    fmt.Sprintf("%d bad frames sent on %d connections; each answered with NOTICE or refused", sent.Load(), conns.Load()),
		Counts: map[string]int64{"sent": sent.Load(), "conns": conns.Load()},
	}
}
