package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// These tests run the gateway in this process (so -race sees its
// goroutines) against the khatru backend in testdata, built and started as
// its own process. Every wait polls with a deadline.
const backendDeadline = 90 * time.Second

var khatruBuild struct {
	once sync.Once
	bin  string
	err  error
}

func khatruBinary(t *testing.T) string {
	t.Helper()
	khatruBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "gateway-khatru-")
		if err != nil {
			khatruBuild.err = err
			return
		}
		bin := filepath.Join(dir, "khatru-backend")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		cmd.Dir = filepath.Join("testdata", "khatru-backend")
		if out, err := cmd.CombinedOutput(); err != nil {
			khatruBuild.err = fmt.Errorf("go build testdata/khatru-backend: %w\n%s", err, out)
			return
		}
		khatruBuild.bin = bin
	})
	if khatruBuild.err != nil {
		t.Fatal(khatruBuild.err)
	}
	return khatruBuild.bin
}

// khatru is a backend process at a fixed address and data directory.
type khatru struct {
	addr, data string
	flags      []string
	cmd        *exec.Cmd
	exited     chan struct{}
}

func startKhatru(t *testing.T, flags ...string) *khatru {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &khatru{addr: ln.Addr().String(), data: t.TempDir(), flags: flags}
	ln.Close()
	k.start(t)
	return k
}

func (k *khatru) url() string { return "ws://" + k.addr }

func (k *khatru) start(t *testing.T) {
	t.Helper()
	k.cmd = exec.Command(khatruBinary(t), append([]string{"--listen", k.addr, "--data", k.data}, k.flags...)...)
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k.exited = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		// Owned by the process: ends at its exit.
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "relay ws://") {
				close(ready)
			}
		}
		k.cmd.Wait()
		close(k.exited)
	}()
	t.Cleanup(func() { k.cmd.Process.Kill(); <-k.exited })
	select {
	case <-ready:
	case <-k.exited:
		t.Fatal("khatru exited before serving")
	case <-time.After(30 * time.Second):
		t.Fatal("khatru did not start")
	}
}

func (k *khatru) stop(t *testing.T) {
	t.Helper()
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("khatru did not stop")
	}
}

// client is a plain NIP-01 client for the tests' own view of a relay.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialClient(t *testing.T, url string) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

// publish sends ev, answering an AUTH challenge as key if the relay asks,
// and returns the final OK.
func (c *client) publish(ev *nostr.Event, key nostr.SecretKey, url string) relayMsg {
	c.t.Helper()
	c.ws.WriteMessage(websocket.TextMessage, frame("EVENT", eventJSON(ev)))
	c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var authID [32]byte
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatal(err)
		}
		m, err := parseRelayMessage(data)
		if err != nil {
			continue
		}
		switch {
		case m.Type == msgAuth:
			auth := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: nostr.KindClientAuth, Tags: nostr.Tags{{"relay", url}, {"challenge", m.Text}}}
			key.Sign(auth)
			authID = auth.ID
			c.ws.WriteMessage(websocket.TextMessage, frame("AUTH", eventJSON(auth)))
		case m.Type == msgOK && m.EventID == authID:
			c.ws.WriteMessage(websocket.TextMessage, frame("EVENT", eventJSON(ev)))
		case m.Type == msgOK && m.EventID == ev.ID && prefix(m.Text) != "auth-required":
			return m
		}
	}
}

// has returns which of ids the relay serves.
func (c *client) has(ids [][32]byte) map[[32]byte]bool {
	c.t.Helper()
	found := make(map[[32]byte]bool)
	c.ws.WriteMessage(websocket.TextMessage, frame("REQ", "q", nostr.Filter{IDs: ids}))
	c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatal(err)
		}
		m, err := parseRelayMessage(data)
		if err != nil || m.SubID != "q" {
			continue
		}
		if m.Type == msgEvent {
			found[m.Event.ID] = true
		}
		if m.Type == msgEOSE || m.Type == msgClosed {
			c.ws.WriteMessage(websocket.TextMessage, frame("CLOSE", "q"))
			return found
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(backendDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within the deadline", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAgainstKhatru carries events both ways through a backend that wants
// NIP-42 AUTH and speaks NIP-77, across a backend outage, and checks the
// cursors persisted at the end.
func TestAgainstKhatru(t *testing.T) {
	backend := startKhatru(t, "--negentropy", "--auth-writes")
	g, rl, st := newTestGateway(t)
	g.s.Backend = backend.url()
	g.s.RetryMin, g.s.RetryMax = 20*time.Millisecond, 200*time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()
	var stopOnce sync.Once
	var runErr error
	stop := func() error {
		stopOnce.Do(func() {
			cancel()
			runErr = <-ran
		})
		return runErr
	}
	defer stop()

	writer, _ := nostr.GenerateSecretKey()
	author, _ := nostr.GenerateSecretKey()
	now := time.Now().Unix()
	note := func(s string) *nostr.Event { return makeEvent(t, author, now, 1, s, nil) }
	ids := func(evs []*nostr.Event) [][32]byte {
		out := make([][32]byte, len(evs))
		for i, ev := range evs {
			out[i] = ev.ID
		}
		return out
	}
	onMesh := func(evs []*nostr.Event) bool {
		for _, ev := range evs {
			found := false
			st.Query(context.Background(), &nostr.Filter{IDs: [][32]byte{ev.ID}}, 1, func(*nostr.Event) bool { found = true; return false })
			if !found {
				return false
			}
		}
		return true
	}
	onBackend := func(evs []*nostr.Event) bool {
		return len(dialClient(t, backend.url()).has(ids(evs))) == len(evs)
	}

	var meshSide, backendSide []*nostr.Event
	for i := range 10 {
		meshSide = append(meshSide, note(fmt.Sprintf("mesh %d", i)))
		backendSide = append(backendSide, note(fmt.Sprintf("backend %d", i)))
	}
	for _, ev := range meshSide[:5] {
		if _, err := rl.AddEvent(ctx, ev, relay.FromClient); err != nil {
			t.Fatal(err)
		}
	}
	bc := dialClient(t, backend.url())
	for _, ev := range backendSide[:5] {
		if m := bc.publish(ev, writer, backend.url()); !m.OK {
			t.Fatalf("backend refused %s: %s", ev.Content, m.Text)
		}
	}
	waitFor(t, "mesh → backend", func() bool { return onBackend(meshSide[:5]) })
	waitFor(t, "backend → mesh", func() bool { return onMesh(backendSide[:5]) })

	backend.stop(t)
	for _, ev := range meshSide[5:] {
		if _, err := rl.AddEvent(ctx, ev, relay.FromMesh); err != nil {
			t.Fatal(err)
		}
	}
	backend.start(t)
	bc = dialClient(t, backend.url())
	for _, ev := range backendSide[5:] {
		if m := bc.publish(ev, writer, backend.url()); !m.OK {
			t.Fatalf("backend refused %s: %s", ev.Content, m.Text)
		}
	}
	waitFor(t, "mesh → backend after the outage", func() bool { return onBackend(meshSide) })
	waitFor(t, "backend → mesh after the outage", func() bool { return onMesh(backendSide) })
	waitFor(t, "queue drained", func() bool { return g.queue.len() == 0 })

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cur, err := g.state.load()
	if err != nil {
		t.Fatal(err)
	}
	if cur.In < now-60 || cur.Out < now-60 {
		t.Fatalf("cursors %+v not advanced past the start of the test (%d)", cur, now)
	}
}
