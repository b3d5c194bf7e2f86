package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Connection flood bounds: the file limit the node runs under, the
// connections the flood tries from one address, and the honest client's
// rounds while the flood holds what it got.
const (
	floodFileLimit = 1024
	floodConns     = 1200
	floodWorkers   = 64
	floodRounds    = 20
	floodBudget    = 2 * time.Minute
)

// dialFrom opens a WebSocket to url from the local address ip (any of
// 127.0.0.0/8 on Linux), as a client on another machine would.
func dialFrom(ctx context.Context, url, ip string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{
		HandshakeTimeout: 10 * time.Second,
		NetDialContext:   (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
	}
	return d.DialContext(ctx, url, nil)
}

// startNodeWithFileLimit runs a node of home under a file limit of limit
// (soft and hard, set by prlimit before the binary starts, as a service
// manager's LimitNOFILE does).
func startNodeWithFileLimit(t *testing.T, home string, limit int) *node {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	cmd := exec.Command(prlimit, fmt.Sprintf("--nofile=%d:%d", limit, limit), "--",
		binary, "run", "--home", home, "--listen", "127.0.0.1:0")
	n, err := startNodeCmd(t, home, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// openFDs counts the descriptors a process holds.
func openFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestConnectionFlood is issue 19's flood: a node with no config changes
// at a file limit of 1,024; one client on 127.0.0.1 tries 1,200 WebSocket
// connections and keeps what it gets; meanwhile a client on 127.0.0.2
// connects, publishes and reads back, round after round. The flood must
// get no more than the per-address cap, every honest round must succeed,
// and the node must never run out of descriptors (no EMFILE in its log).
func TestConnectionFlood(t *testing.T) {
	n := startNodeWithFileLimit(t, newHome(t, ""), floodFileLimit)
	if !strings.Contains(n.output(), "connection budget") {
		t.Fatalf("the node logged no connection budget\n%s", n.output())
	}
	ctx, cancel := context.WithTimeout(context.Background(), floodBudget)
	defer cancel()

	var (
		mu      sync.Mutex
		held    []*websocket.Conn
		refused = map[int]int{}
		failed  atomic.Int64 // dials that got no HTTP answer at all
	)
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	var tried atomic.Int64
	var wg sync.WaitGroup
	floodDone := make(chan struct{})
	for w := 0; w < floodWorkers; w++ {
		wg.Add(1)
		go func() {
			// Owned by the test: ends after floodConns dials in all.
			defer wg.Done()
			for tried.Add(1) <= floodConns && ctx.Err() == nil {
				c, res, err := dialFrom(ctx, n.url, "127.0.0.1")
				mu.Lock()
				switch {
				case err == nil:
					held = append(held, c)
				case res != nil:
					refused[res.StatusCode]++
				default:
					failed.Add(1)
				}
				mu.Unlock()
			}
		}()
	}
	go func() {
		wg.Wait()
		close(floodDone)
	}()

	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < floodRounds; round++ {
		c, res, err := dialFrom(ctx, n.url, "127.0.0.2")
		if err != nil {
			t.Fatalf("round %d: the client on 127.0.0.2 could not connect during the flood: %v (response %v)\n%s", round, err, res, tail(n.output(), 4000))
		}
		e, err := u.sign(1, randomContent(fmt.Sprint("flood round ", round)), nil)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := publishOne(c, e)
		if err != nil || !ok.Accepted {
			t.Fatalf("round %d: publish during the flood: %+v %v", round, ok, err)
		}
		got, err := storedEvents(c, "r", map[string]any{"ids": []string{e.ID}})
		if err != nil || len(got) != 1 || got[0].ID != e.ID {
			t.Fatalf("round %d: read back during the flood: %v %v", round, got, err)
		}
		c.Close()
	}
	<-floodDone

	mu.Lock()
	opened := len(held)
	mu.Unlock()
	fds := openFDs(n.cmd.Process.Pid)
	t.Logf("flood from 127.0.0.1: %d of %d opened, refused by status %v, %d without an answer; node holds %d descriptors", opened, floodConns, refused, failed.Load(), fds)
	const perIPDefault = 64 // relay.DefaultConfig().MaxConnsPerIP
	if opened > perIPDefault {
		t.Errorf("the flood opened %d connections from one address; the default cap is %d", opened, perIPDefault)
	}
	if refused[http.StatusTooManyRequests] == 0 {
		t.Errorf("no connection of the flood was refused with 429: %v", refused)
	}
	if out := n.output(); strings.Contains(out, "too many open files") {
		t.Errorf("the node ran out of file descriptors:\n%s", tail(out, 4000))
	}
	select {
	case <-n.exited:
		t.Fatalf("the node exited during the flood: %v", n.err)
	default:
	}
	if err := n.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("node did not stop cleanly after the flood: %v\n%s", err, tail(n.output(), 4000))
	}
}
