package mesh

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestInteropJSLibp2p runs a js-libp2p node (npm libp2p 3 with
// @libp2p/gossipsub) against a Go mesh host over real TCP on 127.0.0.1,
// and checks that GossipSub messages on a fleetmesh topic flow both ways:
// an event the JS node publishes passes the Go validator and reaches the
// Go sink, and an event the Go node publishes reaches the JS node.
func TestInteropJSLibp2p(t *testing.T) {
	interop, err := filepath.Abs("../interop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(interop, "node_modules", "@libp2p", "gossipsub")); err != nil {
		t.Fatalf("interop/node_modules is missing the js-libp2p packages; run `npm ci` in interop/ (scripts/test.sh does): %v", err)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for the interop test: %v", err)
	}

	sink := newRecordingSink()
	cfg := Config{
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		DHT:         DHTOff,
	}
	m, err := Open(newKey(t), cfg, Hooks{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	authors := authorsOnDistinctShards(t, 1)
	au := authors[0]
	if err := m.Subscribe(au.shard); err != nil {
		t.Fatal(err)
	}
	fromJS := au.event(t, 1, "from js-libp2p: \"quoted\"\nand a newline, é")
	fromGo := au.event(t, 1, "from go-libp2p")

	addr := ""
	for _, a := range m.Host().Addrs() {
		if strings.HasPrefix(a.String(), "/ip4/127.0.0.1/tcp/") {
			addr = a.String() + "/p2p/" + m.Host().ID().String()
		}
	}
	if addr == "" {
		t.Fatalf("no loopback TCP address among %v", m.Host().Addrs())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, filepath.Join(interop, "libp2p", "gossip.mjs"), addr, Topic(au.shard), string(fromJS.AppendJSON(nil)))
	cmd.Dir = interop
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			t.Errorf("node exited with %v; stderr:\n%s", err, stderr.String())
		}
	}()

	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	saw := func(prefix string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest, true
			}
		}
		return "", false
	}

	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("node stdout:\n%s\nstderr:\n%s", strings.Join(lines, "\n"), stderr.String())
			mu.Unlock()
		}
	})

	// JS → Go.
	eventually(t, 40*time.Second, "the Go sink receives the event the JS node published", func() bool {
		if cmd.ProcessState != nil {
			t.Fatalf("node exited early; stderr:\n%s", stderr.String())
		}
		return sink.has(fromJS.ID)
	})
	if st := m.Stats(); len(st.Invalid) != 0 {
		t.Fatalf("the Go validator rejected JS messages: %v", st.Invalid)
	}

	// Go → JS.
	if err := m.Publish(ctx, fromGo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("node stdout:\n%s\nstderr:\n%s", strings.Join(lines, "\n"), stderr.String())
			mu.Unlock()
		}
	})
	eventually(t, 20*time.Second, "the JS node receives the event the Go node published", func() bool {
		got, ok := saw("RECEIVED ")
		if !ok {
			return false
		}
		var ev nostr.Event
		if err := ev.UnmarshalJSON([]byte(got)); err != nil {
			t.Fatalf("JS received something that is not an event: %v", err)
		}
		if ev.ID != fromGo.ID {
			t.Fatalf("JS received event %s, want %s", ev.IDHex(), fromGo.IDHex())
		}
		return true
	})
	if _, ok := saw("RECEIVED " + string(fromJS.AppendJSON(nil))); ok {
		t.Fatal("the JS node was handed its own event back")
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("interop test ran out of time")
	}
}
