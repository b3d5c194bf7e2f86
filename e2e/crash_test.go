package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Crash-safety bounds. The loop is bounded in iterations and each phase by
// a deadline; nothing asserts how long anything took.
const (
	crashIterations  = 8
	crashPublishers  = 4
	crashInFlight    = 16 // events a publisher sends before waiting for OKs
	crashMinAcked    = 20 // OK trues to see before the kill can happen
	crashPhaseBudget = 30 * time.Second
	crashFetchChunk  = 100
)

// ackLog records every event id the relay acknowledged with OK true.
type ackLog struct {
	mu       sync.Mutex
	ids      map[string]bool
	refused  map[string]int // OK false messages, for the failure report
	newSince int
}

func (a *ackLog) add(m okMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m.Accepted {
		if !a.ids[m.ID] {
			a.ids[m.ID] = true
			a.newSince++
		}
		return
	}
	a.refused[m.Message]++
}

func (a *ackLog) fresh() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.newSince
}

func (a *ackLog) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}

func (a *ackLog) snapshot() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.newSince = 0
	out := make([]string, 0, len(a.ids))
	for id := range a.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// publish sends the events next makes on one connection until the
// connection breaks or ctx ends, keeping up to crashInFlight
// unacknowledged, and logs every OK.
func publish(ctx context.Context, url string, next func() (*event, error), acks *ackLog) {
	c, err := dial(ctx, url)
	if err != nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	slots := make(chan struct{}, crashInFlight)
	readerDone := make(chan struct{})
	go func() {
		// Owned by publish: ends when the connection is closed.
		defer close(readerDone)
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if m, ok := parseOK(data); ok {
				acks.add(m)
				select {
				case <-slots:
				default:
				}
			}
		}
	}()
	defer func() { c.Close(); <-readerDone }()
	for {
		select {
		case slots <- struct{}{}:
		case <-readerDone:
			return
		case <-ctx.Done():
			return
		}
		e, err := next()
		if err != nil {
			return
		}
		msg, _ := json.Marshal([]any{"EVENT", e})
		if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
			return
		}
	}
}

// TestCrashSafety kills the node with SIGKILL while several clients publish
// and checks, after every restart, that every event that got OK true is
// served.
func TestCrashSafety(t *testing.T) {
	needBinary(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	home := newHome(t, nodeConfig(nil))
	acks := &ackLog{ids: map[string]bool{}, refused: map[string]int{}}
	for iter := 0; iter < crashIterations; iter++ {
		n := startNode(t, home)
		checkAllServed(t, n, acks, iter)
		ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
		wait := publishers(ctx, t, n.url, acks, plainNote)
		// Wait for some acknowledgements, then kill at a random moment.
		waitForAcks(t, n, acks)
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		n.kill()
		cancel()
		wait()
	}
	n := startNode(t, home)
	checkAllServed(t, n, acks, crashIterations)
	if err := n.stop(); err != nil {
		t.Errorf("SIGTERM after the crash loop: %v", err)
	}
	t.Logf("%d acknowledged events all served after %d kills; OK false counts %v", len(acks.ids), crashIterations, acks.refused)
}

func checkAllServed(t *testing.T, n *node, acks *ackLog, iter int) {
	t.Helper()
	ids := acks.snapshot()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
	defer cancel()
	found, err := fetchIDs(ctx, n.url, ids, crashFetchChunk)
	if err != nil {
		t.Fatalf("after kill %d: fetching %d acknowledged ids: %v\n%s", iter, len(ids), err, n.output())
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("after kill %d: %d of %d acknowledged events are lost (OK true was sent, REQ by id does not serve them), e.g. %v",
			iter, len(missing), len(ids), missing[:min(5, len(missing))])
	}
}
