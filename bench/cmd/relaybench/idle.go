package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// idleConns is a set of open, silent WebSocket connections. Each has a
// reader goroutine, owned by the set, that answers the relay's pings;
// close stops them all.
type idleConns struct {
	conns []*websocket.Conn
	wg    sync.WaitGroup
}

// openIdle opens n connections to relayURL, dialing from a few goroutines
// at a time so the relay sees a burst but not a thundering herd.
func openIdle(ctx context.Context, relayURL string, n int, timeout time.Duration) (*idleConns, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	const dialers = 8
	conns := make([]*websocket.Conn, n)
	errs := make([]error, dialers)
	var wg sync.WaitGroup
	for d := range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := d; i < n; i += dialers {
				c, err := dial(ctx, relayURL)
				if err != nil {
					errs[d] = fmt.Errorf("idle connection %d: %w", i, err)
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	ic := &idleConns{}
	for _, c := range conns {
		if c != nil {
			ic.conns = append(ic.conns, c)
		}
	}
	for _, c := range ic.conns {
		ic.wg.Add(1)
		go func() {
			defer ic.wg.Done()
			// ReadMessage runs the default ping handler; it returns when
			// the connection is closed.
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
	}
	for _, err := range errs {
		if err != nil {
			ic.close()
			return nil, err
		}
	}
	return ic, nil
}

func (ic *idleConns) close() {
	for _, c := range ic.conns {
		c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		c.Close()
	}
	ic.wg.Wait()
}
