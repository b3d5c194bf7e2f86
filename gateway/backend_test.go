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
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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

// client is a plain NIP-01 client for the tests' own view of a relay; it
// answers AUTH challenges as key when the relay asks.
type client struct {
	t         *testing.T
	ws        *websocket.Conn
	url       string
	key       nostr.SecretKey
	challenge string
}

func dialClient(t *testing.T, url string, key nostr.SecretKey) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws, url: url, key: key}
}

// send writes one message to the relay.
func (c *client) send(m nostr.ClientMessage) {
	c.ws.WriteMessage(websocket.TextMessage, m.AppendJSON(nil))
}

// next reads one message, remembering AUTH challenges.
func (c *client) next() *nostr.RelayMessage {
	c.t.Helper()
	for {
		c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatal(err)
		}
		m, err := nostr.ParseRelayMessage(data)
		if err != nil {
			continue
		}
		if m.Type == nostr.MsgAuth {
			c.challenge = m.Text
			continue
		}
		return m
	}
}

// auth answers the latest challenge and waits for its OK.
func (c *client) auth() {
	c.t.Helper()
	ev := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: nostr.KindClientAuth, Tags: nostr.Tags{{"relay", c.url}, {"challenge", c.challenge}}}
	c.key.Sign(ev)
	c.send(nostr.ClientMessage{Type: nostr.MsgAuth, Event: ev})
	for {
		if m := c.next(); m.Type == nostr.MsgOK && m.EventID == ev.ID {
			if !m.OK {
				c.t.Fatalf("AUTH refused: %s", m.Text)
			}
			return
		}
	}
}

// publish sends ev until the relay settles it (authenticating and waiting
// out rate limits as needed) and returns the final OK.
func (c *client) publish(ev *nostr.Event) *nostr.RelayMessage {
	c.t.Helper()
	for {
		c.send(nostr.ClientMessage{Type: nostr.MsgEvent, Event: ev})
		var m *nostr.RelayMessage
		for m = c.next(); m.Type != nostr.MsgOK || m.EventID != ev.ID; m = c.next() {
		}
		switch prefix(m.Text) {
		case "auth-required":
			c.auth()
		case "rate-limited":
			time.Sleep(10 * time.Millisecond) // the relay asked; any wait will do
		default:
			return m
		}
	}
}

// has returns which of ids the relay serves.
func (c *client) has(ids [][32]byte) map[[32]byte]bool {
	c.t.Helper()
	found := make(map[[32]byte]bool)
	c.send(nostr.ClientMessage{Type: nostr.MsgReq, SubID: "q", Filters: []nostr.Filter{{IDs: ids}}})
	for {
		m := c.next()
		if m.SubID != "q" {
			continue
		}
		switch m.Type {
		case nostr.MsgEvent:
			found[m.Event.ID] = true
		case nostr.MsgClosed:
			if prefix(m.Text) != "auth-required" {
				c.t.Fatalf("REQ closed: %s", m.Text)
			}
			c.auth()
			c.send(nostr.ClientMessage{Type: nostr.MsgReq, SubID: "q", Filters: []nostr.Filter{{IDs: ids}}})
		case nostr.MsgEOSE:
			c.send(nostr.ClientMessage{Type: nostr.MsgClose, SubID: "q"})
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

// TestAgainstKhatru carries events both ways, across a backend outage,
// through a backend with NIP-77 that wants AUTH for writes and one without
// NIP-77 that wants AUTH for reads, and checks the cursors persisted.
func TestAgainstKhatru(t *testing.T) {
	for _, flags := range [][]string{
		{"--negentropy", "--auth-writes"},
		{"--auth-reads"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) { carryBothWays(t, flags) })
	}
}

func carryBothWays(t *testing.T, flags []string) {
	backend := startKhatru(t, flags...)
	// A one-event queue, so events stored during the outage overflow it and
	// only the catch-up can carry them, and pages smaller than the events
	// of one second, so the since-window walk has to sweep a second.
	g, rl, st := newTestGateway(t, func(s *Settings) {
		s.Backend = backend.url()
		s.RetryMin, s.RetryMax = 20*time.Millisecond, 200*time.Millisecond
		s.QueueSize = 1
		s.PageSize = 3
	})

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
		return len(dialClient(t, backend.url(), writer).has(ids(evs))) == len(evs)
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
	bc := dialClient(t, backend.url(), writer)
	for _, ev := range backendSide[:5] {
		if m := bc.publish(ev); !m.OK {
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
	bc = dialClient(t, backend.url(), writer)
	for _, ev := range backendSide[5:] {
		if m := bc.publish(ev); !m.OK {
			t.Fatalf("backend refused %s: %s", ev.Content, m.Text)
		}
	}
	waitFor(t, "mesh → backend after the outage", func() bool { return onBackend(meshSide) })
	waitFor(t, "backend → mesh after the outage", func() bool { return onMesh(backendSide) })
	waitFor(t, "queue drained", func() bool { return g.queue.len() == 0 })
	if got := counterValue(t, g.m.dropped); got < 1 {
		t.Fatalf("queue_dropped_total = %v: the outage did not overflow the queue, so the catch-up went untested", got)
	}

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

// TestBackendRefusals publishes to a backend that blocks one kind and
// rate-limits every event once: the blocked event is counted and not
// retried, the others are delivered after backing off, and the queue
// drains.
func TestBackendRefusals(t *testing.T) {
	backend := startKhatru(t, "--negentropy", "--block-kind", "7", "--rate-limit-once")
	g, rl, _ := newTestGateway(t)
	g.s.Backend = backend.url()
	g.s.RetryMin, g.s.RetryMax = 10*time.Millisecond, 50*time.Millisecond
	ctx := runGateway(t, g)
	waitFor(t, "connected", func() bool { return gaugeValue(t, g.m.connected) == 1 })

	author, _ := nostr.GenerateSecretKey()
	now := time.Now().Unix()
	blocked := makeEvent(t, author, now, 7, "+", nil)
	var notes []*nostr.Event
	for i := range 5 {
		notes = append(notes, makeEvent(t, author, now, 1, fmt.Sprintf("note %d", i), nil))
	}
	for _, ev := range append([]*nostr.Event{blocked}, notes...) {
		if _, err := rl.AddEvent(ctx, ev, relay.FromClient); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([][32]byte, 0, 6)
	for _, ev := range append(notes, blocked) {
		ids = append(ids, ev.ID)
	}
	key, _ := nostr.GenerateSecretKey()
	waitFor(t, "notes delivered despite the rate limit", func() bool {
		found := dialClient(t, backend.url(), key).has(ids)
		for _, ev := range notes {
			if !found[ev.ID] {
				return false
			}
		}
		return true
	})
	waitFor(t, "queue drained", func() bool { return g.queue.len() == 0 })
	if dialClient(t, backend.url(), key).has(ids)[blocked.ID] {
		t.Fatal("the backend has the event it blocked")
	}
	if got := counterValue(t, g.m.rejected.WithLabelValues("blocked")); got < 1 {
		t.Fatalf("rejections{blocked} = %v, want the refusal counted", got)
	}
	if got := counterValue(t, g.m.carried.WithLabelValues(dirToBackend)); got < float64(len(notes)) {
		t.Fatalf("carried to_backend = %v, want at least %d", got, len(notes))
	}
}

// runGateway runs g until the test ends, and returns the context it runs
// in.
func runGateway(t *testing.T, g *Gateway) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	return ctx
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
