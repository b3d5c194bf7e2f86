package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// ingestConfig shapes the publishing load.
type ingestConfig struct {
	clients  int           // concurrent WebSocket connections
	pipeline int           // max unacknowledged EVENTs per connection
	timeout  time.Duration // whole phase
	ackWait  time.Duration // max wait for any one OK
}

// ingestResult is what one relay did with the corpus.
type ingestResult struct {
	Sent          int64     `json:"sent"`
	OKTrue        int64     `json:"okTrue"`
	OKFalse       int64     `json:"okFalse"`
	Notices       int64     `json:"notices"`
	Seconds       float64   `json:"seconds"`
	EventsPerSec  float64   `json:"eventsPerSec"`
	DecileRates   []float64 `json:"decileEventsPerSec"` // OK-true rate within each tenth of the run's events
	FalseReasons  []string  `json:"falseReasons,omitempty"`
	Error         string    `json:"error,omitempty"`
	TimedOut      bool      `json:"timedOut"`
	PipelineDepth int       `json:"pipeline"`
	Clients       int       `json:"clients"`
	// CPUMicrosPerEvent is the relay process's user+system CPU time over
	// the ingest phase divided by the events acknowledged: unlike events/s,
	// it hardly depends on what else the shared machine is running.
	CPUMicrosPerEvent float64 `json:"relayCpuMicrosPerEvent"`
}

// ingest publishes every frame of c to relayURL from cfg.clients
// connections, client i taking frames i, i+clients, ...; each client keeps
// at most cfg.pipeline EVENTs in flight and counts the OKs it gets back.
func ingest(ctx context.Context, relayURL string, c *corpus, cfg ingestConfig) ingestResult {
	res := ingestResult{PipelineDepth: cfg.pipeline, Clients: cfg.clients}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	conns := make([]*websocket.Conn, cfg.clients)
	for i := range conns {
		conn, err := dial(ctx, relayURL)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			res.Error = err.Error()
			return res
		}
		conns[i] = conn
	}

	total := int64(len(c.frames))
	var okTrue, okFalse, acks, notices, sent atomic.Int64
	var reasonsMu sync.Mutex
	reasons := map[string]int{}
	// deciles[k] is when the (k+1)/10 mark of acknowledged events was passed.
	deciles := make([]atomic.Int64, 10)
	start := time.Now()
	markAck := func(accepted bool) {
		if accepted {
			okTrue.Add(1)
		} else {
			okFalse.Add(1)
		}
		n := acks.Add(1)
		if k := n * 10 / total; n*10%total == 0 && k >= 1 && k <= 10 {
			deciles[k-1].Store(int64(time.Since(start)))
		}
	}

	var wg sync.WaitGroup
	errs := make([]error, cfg.clients)
	for ci, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[ci] = runPublisher(ctx, conn, c.frames, ci, cfg, &sent, &notices, markAck, func(reason string) {
				reasonsMu.Lock()
				if len(reasons) < 20 {
					reasons[reason]++
				}
				reasonsMu.Unlock()
			})
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	res.Sent = sent.Load()
	res.OKTrue = okTrue.Load()
	res.OKFalse = okFalse.Load()
	res.Notices = notices.Load()
	res.Seconds = elapsed.Seconds()
	res.EventsPerSec = float64(res.OKTrue) / elapsed.Seconds()
	prev := time.Duration(0)
	for k := range deciles {
		at := time.Duration(deciles[k].Load())
		if at == 0 {
			break
		}
		res.DecileRates = append(res.DecileRates, float64(total)/10/(at-prev).Seconds())
		prev = at
	}
	for r, n := range reasons {
		res.FalseReasons = append(res.FalseReasons, fmt.Sprintf("%dx %s", n, r))
	}
	if err := errors.Join(errs...); err != nil {
		res.Error = err.Error()
	}
	res.TimedOut = ctx.Err() != nil
	return res
}

// runPublisher is one publishing client. Its reader goroutine is owned by it
// and stops when the connection is closed on return.
func runPublisher(ctx context.Context, conn *websocket.Conn, frames [][]byte, ci int, cfg ingestConfig,
	sent, notices *atomic.Int64, markAck func(accepted bool), onFalse func(string)) error {
	defer conn.Close()
	mine := 0
	for i := ci; i < len(frames); i += cfg.clients {
		mine++
	}
	slots := make(chan struct{}, cfg.pipeline)
	readErr := make(chan error, 1)
	go func() {
		acked := 0
		for acked < mine {
			conn.SetReadDeadline(time.Now().Add(cfg.ackWait))
			_, msg, err := conn.ReadMessage()
			if err != nil {
				readErr <- fmt.Errorf("client %d: read after %d/%d OKs: %w", ci, acked, mine, err)
				return
			}
			label, _, ok := frameHead(msg)
			switch {
			case !ok:
				readErr <- fmt.Errorf("client %d: malformed relay message %.200q", ci, msg)
				return
			case label == "OK":
				var ack []json.RawMessage
				var accepted bool
				if err := json.Unmarshal(msg, &ack); err != nil || len(ack) < 3 || json.Unmarshal(ack[2], &accepted) != nil {
					readErr <- fmt.Errorf("client %d: malformed OK %.200q", ci, msg)
					return
				}
				markAck(accepted)
				if !accepted {
					var reason string
					if len(ack) > 3 {
						json.Unmarshal(ack[3], &reason)
					}
					onFalse(reason)
				}
				acked++
				<-slots
			case label == "NOTICE":
				notices.Add(1)
				onFalse("NOTICE " + string(msg))
			}
		}
		readErr <- nil
	}()

	for i := ci; i < len(frames); i += cfg.clients {
		select {
		case slots <- struct{}{}:
		case err := <-readErr:
			if err == nil {
				err = fmt.Errorf("client %d: reader stopped early", ci)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("client %d: %w", ci, ctx.Err())
		}
		conn.SetWriteDeadline(time.Now().Add(cfg.ackWait))
		if err := conn.WriteMessage(websocket.TextMessage, frames[i]); err != nil {
			return fmt.Errorf("client %d: write: %w", ci, err)
		}
		sent.Add(1)
	}
	select {
	case err := <-readErr:
		return err
	case <-ctx.Done():
		return fmt.Errorf("client %d: waiting for OKs: %w", ci, ctx.Err())
	}
}
