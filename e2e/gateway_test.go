package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The gateway tests run `fleetmesh gateway` against a private relay backend
// nobody here wrote: khatru (gateway/testdata/khatru-backend, its own
// module, built here from a clean clone like everything else). Each phase
// is bounded by a deadline and polls; nothing asserts a duration.
const (
	gwBuildTimeout = 5 * time.Minute
	gwDeadline     = 90 * time.Second // a whole crossing, on a loaded 2-core machine
	gwFetchChunk   = 100
)

// testdataBuild builds one test helper program, a module of its own under
// gateway/testdata, once per test binary.
type testdataBuild struct {
	dir  string // under gateway/testdata
	once sync.Once
	bin  string
	err  error
}

// need builds the program the first time and returns its path; it fails
// t if the build failed.
func (b *testdataBuild) need(t *testing.T) string {
	t.Helper()
	needBinary(t)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "fleetmesh-"+b.dir+"-")
		if err != nil {
			b.err = err
			return
		}
		bin := filepath.Join(dir, b.dir)
		ctx, cancel := context.WithTimeout(context.Background(), gwBuildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		cmd.Dir = filepath.Join(moduleRoot, "gateway", "testdata", b.dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build gateway/testdata/%s: %w\n%s", b.dir, err, out)
			return
		}
		b.bin = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// gwBackendBuild is the khatru (v0.17.4) backend.
var gwBackendBuild = &testdataBuild{dir: "khatru-backend"}

func needBackend(t *testing.T) string {
	t.Helper()
	return gwBackendBuild.need(t)
}

// gwProc is a running process that prints "relay ws://…" when it serves:
// the khatru backend or `fleetmesh gateway`.
type gwProc struct {
	name   string
	cmd    *exec.Cmd
	url    string
	stdout *lockedBuffer
	stderr *lockedBuffer
	exited chan struct{}
	err    error
}

func gwStart(t *testing.T, name, bin string, args ...string) *gwProc {
	t.Helper()
	p, err := gwTryStart(t, name, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func gwTryStart(t *testing.T, name, bin string, args ...string) (*gwProc, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	p := &gwProc{name: name, cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	ready, err := startWatched(cmd, p.stdout, p.stderr, &p.err, p.exited)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	t.Cleanup(p.kill)
	select {
	case p.url = <-ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before serving: %v\n%s", name, p.err, p.output())
	case <-time.After(startTimeout):
		p.kill()
		return nil, fmt.Errorf("%s printed no relay line within %s\n%s", name, startTimeout, p.output())
	}
}

func (p *gwProc) output() string {
	return "--- " + p.name + " stdout:\n" + p.stdout.String() + "--- " + p.name + " stderr:\n" + tail(p.stderr.String(), 6000)
}

func (p *gwProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.exited
}

func (p *gwProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("%s exited with %v after SIGTERM\n%s", p.name, p.err, p.output())
		}
	case <-time.After(stopTimeout):
		p.kill()
		t.Fatalf("%s did not exit within %s of SIGTERM\n%s", p.name, stopTimeout, p.output())
	}
}

// gwFreeAddr returns a loopback address that was free a moment ago, so a
// backend can be restarted where the gateway expects it.
func gwFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// gwBackend is a khatru backend with a fixed address and data directory.
type gwBackend struct {
	addr  string
	data  string
	flags []string
	proc  *gwProc
}

func (b *gwBackend) url() string { return "ws://" + b.addr }

func startBackend(t *testing.T, flags ...string) *gwBackend {
	t.Helper()
	b := &gwBackend{addr: gwFreeAddr(t), data: filepath.Join(t.TempDir(), "khatru-data"), flags: flags}
	b.start(t)
	return b
}

func (b *gwBackend) start(t *testing.T) {
	t.Helper()
	args := append([]string{"--listen", b.addr, "--data", b.data}, b.flags...)
	b.proc = gwStart(t, "khatru", needBackend(t), args...)
}

// gwHome makes a gateway home: `fleetmesh init`, a node config without
// rate limits, and a gateway.toml with short retries for tests.
func gwHome(t *testing.T, extra string) string {
	t.Helper()
	home := newHome(t, nodeConfig(nil))
	conf := `to_mesh = [{}]
to_backend = [{}]
retry_min = "100ms"
retry_max = "1s"
publish_timeout = "20s"
overlap = "10m"
` + extra
	if err := os.WriteFile(filepath.Join(home, "gateway.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

func startGateway(t *testing.T, home string, b *gwBackend) *gwProc {
	t.Helper()
	return gwStart(t, "gateway", binary, "gateway", "--home", home, "--backend", b.url(), "--listen", "127.0.0.1:0")
}

// gwSignAt is signAt for test-authored content, which always signs; it
// panics otherwise, so publisher goroutines can use it too.
func gwSignAt(u *user, createdAt int64, kind int, content string, tags [][]string) *event {
	e, err := u.signAt(createdAt, kind, content, tags)
	if err != nil {
		panic(err)
	}
	return e
}

// gwPublish sends events on one connection, in order, and returns every
// OK answer by id.
func gwPublish(ctx context.Context, url string, events []*event) (map[string]okMessage, error) {
	c, err := dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	oks := make(map[string]okMessage, len(events))
	for _, e := range events {
		msg, _ := json.Marshal([]any{"EVENT", e})
		if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
			return oks, err
		}
	}
	for len(oks) < len(events) {
		_, data, err := c.ReadMessage()
		if err != nil {
			return oks, fmt.Errorf("waiting for OKs from %s: %w", url, err)
		}
		if m, ok := parseOK(data); ok {
			oks[m.ID] = m
		}
	}
	return oks, nil
}

// gwMustPublish publishes and checks every event got the answer expected:
// accepted, or refused with the prefix.
func gwMustPublish(t *testing.T, url string, events []*event, accepted bool, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gwDeadline)
	defer cancel()
	oks, err := gwPublish(ctx, url, events)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		m := oks[e.ID]
		if m.Accepted != accepted || !strings.HasPrefix(m.Message, prefix) {
			t.Fatalf("%s: event kind %d %q: OK %v %q, want %v %q…", url, e.Kind, e.Content, m.Accepted, m.Message, accepted, prefix)
		}
	}
}

func gwIDs(events []*event) []string {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	return ids
}

// gwWaitServed polls until url serves every id, failing with the missing
// ones at the deadline.
func gwWaitServed(t *testing.T, what, url string, ids []string, procs ...*gwProc) {
	t.Helper()
	deadline := time.Now().Add(gwDeadline)
	var missing []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		found, err := fetchIDs(ctx, url, ids, gwFetchChunk)
		cancel()
		if err == nil {
			missing = missing[:0]
			for _, id := range ids {
				if !found[id] {
					missing = append(missing, id)
				}
			}
			if len(missing) == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, p := range procs {
				logs.WriteString(p.output())
			}
			t.Fatalf("%s: %d of %d events never arrived at %s (err %v), e.g. %v\n%s", what, len(missing), len(ids), url, err, missing[:min(3, len(missing))], logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// gwNotServed checks url serves none of ids.
func gwNotServed(t *testing.T, what, url string, events []*event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	found, err := fetchIDs(ctx, url, gwIDs(events), gwFetchChunk)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if found[e.ID] {
			t.Errorf("%s: forbidden event crossed to %s: kind %d content %q tags %v", what, url, e.Kind, e.Content, e.Tags)
		}
	}
}

// gwListener collects every event a live subscription delivers, to catch
// ephemeral events, which no relay stores and so no query would show.
type gwListener struct {
	mu   sync.Mutex
	seen map[string]*event
	c    *websocket.Conn
	done chan struct{}
}

func gwListen(t *testing.T, url string, filter map[string]any) *gwListener {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal([]any{"REQ", "listen", filter})
	if err := c.WriteMessage(websocket.TextMessage, req); err != nil {
		t.Fatal(err)
	}
	l := &gwListener{seen: make(map[string]*event), c: c, done: make(chan struct{})}
	eose := make(chan struct{})
	go func() {
		// Owned by the listener: ends when close closes the connection.
		defer close(l.done)
		var once sync.Once
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			var msg []json.RawMessage
			if json.Unmarshal(data, &msg) != nil || len(msg) < 2 {
				continue
			}
			var typ string
			json.Unmarshal(msg[0], &typ)
			switch typ {
			case "EOSE":
				once.Do(func() { close(eose) })
			case "EVENT":
				var e event
				if len(msg) >= 3 && json.Unmarshal(msg[2], &e) == nil {
					l.mu.Lock()
					l.seen[e.ID] = &e
					l.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(l.close)
	select {
	case <-eose:
	case <-time.After(20 * time.Second):
		t.Fatalf("no EOSE from %s", url)
	}
	return l
}

func (l *gwListener) close() {
	l.c.Close()
	<-l.done
}

func (l *gwListener) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[id] != nil
}

// gwMetric reads one sample's value from a node's /metrics (-1 if absent).
func gwMetric(t *testing.T, relayURL, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + strings.TrimPrefix(relayURL, "ws://") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// gwWaitMetric polls a metric until it has the value.
func gwWaitMetric(t *testing.T, relayURL, sample string, want float64) {
	t.Helper()
	deadline := time.Now().Add(gwDeadline)
	for {
		got := gwMetric(t, relayURL, sample)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", sample, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nsecLike is a string shaped like an nsec: "nsec1" and 58 bech32 data
// characters (the boundary does not require a valid checksum).
func nsecLike(seed string) string {
	const alphabet = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	sum := sha256.Sum256([]byte(seed))
	var b strings.Builder
	b.WriteString("nsec1")
	for i := 0; i < 58; i++ {
		b.WriteByte(alphabet[int(sum[i%32]+byte(i))%32])
	}
	return b.String()
}

// TestGatewayCorpus publishes ordinary events and every excluded class on
// both sides: each ordinary event crosses, no forbidden one does.
func TestGatewayCorpus(t *testing.T) {
	backend := startBackend(t, "--negentropy")
	home := gwHome(t, "")
	gw := startGateway(t, home, backend)

	alice, _ := newUser()
	bob, _ := newUser()
	now := time.Now().Unix()
	key := nsecLike("corpus")
	liveOnly := map[string]any{"limit": 0}

	// Live listeners on both sides: no relay stores ephemeral events, so
	// only a live subscription can tell they crossed.
	meshListen := gwListen(t, gw.url, liveOnly)
	backendListen := gwListen(t, backend.url(), liveOnly)

	// Backend → mesh: forbidden events published straight to khatru, which
	// takes them all (it has no boundary).
	replOld := gwSignAt(bob, now-20, 10002, "relay list v1", [][]string{{"r", "wss://relay.example.org"}})
	replForbidden := gwSignAt(bob, now-10, 10002, "relay list v2 "+key, [][]string{{"r", "wss://relay.example.org"}})
	backendForbidden := []*event{
		gwSignAt(alice, now, 24133, "nip46 request", nil),
		gwSignAt(alice, now, 27235, "nip98 http auth", [][]string{{"u", "https://example.org"}, {"method", "GET"}}),
		gwSignAt(alice, now, 23194, "nwc request", nil),
		gwSignAt(alice, now, 13194, "nwc info", nil),
		gwSignAt(alice, now, 1, "my key is "+key, nil),
		gwSignAt(alice, now, 1, "shouting "+strings.ToUpper(key), nil),
		gwSignAt(alice, now, 1, "split across tags", [][]string{{"x", key[:20]}, {"x", key[20:45]}, {"x", key[45:]}}),
		gwSignAt(alice, now, 1, "split "+key[:30], [][]string{{"x", key[30:]}}),
		gwSignAt(alice, now, 1, "ncryptsec1"+strings.Repeat("qpzry9x8gf", 6), nil),
		gwSignAt(alice, now, 1, "invoice", [][]string{{"fleetmesh-boundary", "billing"}}),
		gwSignAt(alice, now, 30078, "push subscription", [][]string{{"d", "push"}, {"fleetmesh-boundary", "PUSH"}}),
		replForbidden,
	}
	backendEphemeral := []*event{
		gwSignAt(alice, now, 20000, "ephemeral low edge", nil),
		gwSignAt(alice, now, 29999, "ephemeral high edge", nil),
		gwSignAt(alice, now, 25000, "ephemeral middle", nil),
	}
	var backendAllowed []*event
	for i := range 20 {
		backendAllowed = append(backendAllowed, gwSignAt(alice, now, 1, fmt.Sprintf("backend note %d", i), nil))
	}
	backendAllowed = append(backendAllowed,
		gwSignAt(alice, now, 19999, "replaceable below the ephemeral range", nil),
		gwSignAt(alice, now, 30000, "addressable above the ephemeral range", [][]string{{"d", "x"}}),
		gwSignAt(alice, now, 1, "nsec1 is how a secret key starts; never paste one", nil),
		gwSignAt(alice, now, 1, "npub is fine: NPUB1"+strings.ToUpper(strings.TrimPrefix(key, "nsec1")), nil),
	)

	// Mesh → backend: the gateway node's relay refuses the stored classes
	// itself ("blocked:"), and takes ephemeral events for its own clients
	// only; neither may reach the backend.
	meshBlocked := []*event{
		gwSignAt(bob, now, 24133, "nip46 request", nil),
		gwSignAt(bob, now, 27235, "nip98", nil),
		gwSignAt(bob, now, 1, "key "+key, nil),
		gwSignAt(bob, now, 1, "tags", [][]string{{"x", key[:10]}, {"x", key[10:]}}),
		gwSignAt(bob, now, 1, "billing", [][]string{{"fleetmesh-boundary", "Billing"}}),
	}
	meshEphemeral := []*event{
		gwSignAt(bob, now, 20000, "mesh ephemeral low edge", nil),
		gwSignAt(bob, now, 29999, "mesh ephemeral high edge", nil),
		gwSignAt(bob, now, 20001, "mesh ephemeral", nil),
	}
	meshReplOld := gwSignAt(alice, now-20, 10003, "bookmarks v1", nil)
	meshReplForbidden := gwSignAt(alice, now-10, 10003, "bookmarks v2", [][]string{{"x", key}})
	var meshAllowed []*event
	for i := range 20 {
		meshAllowed = append(meshAllowed, gwSignAt(bob, now, 1, fmt.Sprintf("mesh note %d", i), nil))
	}
	meshAllowed = append(meshAllowed,
		gwSignAt(bob, now, 19999, "mesh replaceable below the ephemeral range", nil),
		gwSignAt(bob, now, 30000, "mesh addressable above the ephemeral range", [][]string{{"d", "y"}}),
	)

	// The allowed replaceable versions first, so the forbidden ones would
	// replace them if they crossed.
	gwMustPublish(t, backend.url(), []*event{replOld}, true, "")
	gwMustPublish(t, gw.url, []*event{meshReplOld}, true, "")
	gwWaitServed(t, "backend → mesh", gw.url, []string{replOld.ID}, gw)
	gwWaitServed(t, "mesh → backend", backend.url(), []string{meshReplOld.ID}, gw)

	// Forbidden first, then allowed: once every allowed event arrived, any
	// forbidden one would have arrived before it on the same path.
	gwMustPublish(t, backend.url(), backendForbidden, true, "")
	gwMustPublish(t, backend.url(), backendEphemeral, true, "")
	gwMustPublish(t, gw.url, meshBlocked, false, "blocked:")
	gwMustPublish(t, gw.url, []*event{meshReplForbidden}, false, "blocked:")
	gwMustPublish(t, gw.url, meshEphemeral, true, "")
	gwMustPublish(t, backend.url(), backendAllowed, true, "")
	gwMustPublish(t, gw.url, meshAllowed, true, "")

	gwWaitServed(t, "backend → mesh", gw.url, gwIDs(backendAllowed), gw, backend.proc)
	gwWaitServed(t, "mesh → backend", backend.url(), gwIDs(meshAllowed), gw, backend.proc)

	gwNotServed(t, "backend → mesh", gw.url, backendForbidden)
	gwNotServed(t, "mesh → backend", backend.url(), append(meshBlocked, meshReplForbidden))
	for _, e := range append(backendForbidden, backendEphemeral...) {
		if meshListen.has(e.ID) {
			t.Errorf("kind %d %q reached the mesh side live", e.Kind, e.Content)
		}
	}
	for _, e := range append(meshEphemeral, meshBlocked...) {
		if backendListen.has(e.ID) {
			t.Errorf("kind %d %q reached the backend live", e.Kind, e.Content)
		}
	}
	for _, e := range meshEphemeral {
		if !meshListen.has(e.ID) {
			t.Errorf("ephemeral kind %d was not delivered to the mesh node's own clients", e.Kind)
		}
	}
	// The allowed replaceable versions stay the current ones on the far
	// sides.
	gwWaitServed(t, "replaceable kept", gw.url, []string{replOld.ID}, gw)
	gwWaitServed(t, "replaceable kept", backend.url(), []string{meshReplOld.ID}, gw)

	for _, sample := range []string{
		`fleetmesh_gateway_policy_refusals_total{direction="to_mesh"}`,
		`fleetmesh_gateway_policy_refusals_total{direction="to_backend"}`,
	} {
		if v := gwMetric(t, gw.url, sample); v <= 0 {
			t.Errorf("%s = %v, want refusals counted", sample, v)
		}
	}
	if v := gwMetric(t, gw.url, `fleetmesh_gateway_events_carried_total{direction="to_mesh"}`); v < float64(len(backendAllowed)) {
		t.Errorf("carried to_mesh = %v, want at least %d", v, len(backendAllowed))
	}
}

// TestGatewayBackendOff switches the backend off (its data kept), publishes
// on the mesh side meanwhile, and brings it back: the gateway reconnects
// and both sides end up with everything. The backend here has no NIP-77,
// so the catch-up uses since windows.
func TestGatewayBackendOff(t *testing.T) {
	backend := startBackend(t)
	// A queue smaller than the outage's events: the overflow must be
	// carried by the catch-up. Pages smaller than the events of one second:
	// the since-window walk must not lose any of them.
	home := gwHome(t, "queue_size = 8\npage_size = 5\n")
	gw := startGateway(t, home, backend)
	gwWaitMetric(t, gw.url, "fleetmesh_gateway_backend_connected", 1)

	alice, _ := newUser()
	notes := func(prefix string, n int) []*event {
		out := make([]*event, n)
		for i := range out {
			out[i] = gwSignAt(alice, time.Now().Unix(), 1, fmt.Sprintf("%s %d", prefix, i), nil)
		}
		return out
	}
	before := notes("mesh before", 10)
	gwMustPublish(t, gw.url, before, true, "")
	gwWaitServed(t, "mesh → backend", backend.url(), gwIDs(before), gw)

	backend.proc.stop(t)
	gwWaitMetric(t, gw.url, "fleetmesh_gateway_backend_connected", 0)
	during := notes("mesh while the backend is off", 30)
	gwMustPublish(t, gw.url, during, true, "") // the node keeps serving its clients
	if v := gwMetric(t, gw.url, "fleetmesh_gateway_backlog"); v != 8 {
		t.Errorf("backlog = %v while the backend is off, want the full queue (8)", v)
	}
	if v := gwMetric(t, gw.url, "fleetmesh_gateway_queue_dropped_total"); v <= 0 {
		t.Errorf("queue_dropped_total = %v, want the overflow counted", v)
	}

	backend.start(t)
	// Events the backend takes before the gateway is back must reach the
	// mesh side too.
	onBackend := notes("backend after restart", 10)
	gwMustPublish(t, backend.url(), onBackend, true, "")

	gwWaitServed(t, "mesh → backend after the outage", backend.url(), gwIDs(append(before, during...)), gw, backend.proc)
	gwWaitServed(t, "backend → mesh after the outage", gw.url, gwIDs(onBackend), gw, backend.proc)
	gwWaitMetric(t, gw.url, "fleetmesh_gateway_backlog", 0)
	if v := gwMetric(t, gw.url, `fleetmesh_gateway_catchups_total{direction="to_backend",method="since"}`); v < 2 {
		t.Errorf("since-window catch-ups to_backend = %v, want one per connection (2)", v)
	}
}

// TestGatewayMeshOff stops the gateway while the backend keeps taking
// events, then starts it again: it catches up (NIP-77 here).
func TestGatewayMeshOff(t *testing.T) {
	backend := startBackend(t, "--negentropy")
	home := gwHome(t, "")
	gw := startGateway(t, home, backend)
	gwWaitMetric(t, gw.url, "fleetmesh_gateway_backend_connected", 1)

	alice, _ := newUser()
	first := []*event{gwSignAt(alice, time.Now().Unix(), 1, "before the mesh side stops", nil)}
	gwMustPublish(t, backend.url(), first, true, "")
	gwWaitServed(t, "backend → mesh", gw.url, gwIDs(first), gw)

	gw.stop(t)
	var meanwhile []*event
	for i := range 40 {
		meanwhile = append(meanwhile, gwSignAt(alice, time.Now().Unix()-int64(i), 1, fmt.Sprintf("while the mesh side is off %d", i), nil))
	}
	gwMustPublish(t, backend.url(), meanwhile, true, "") // the backend carries on

	gw = startGateway(t, home, backend)
	gwWaitServed(t, "backend → mesh after the mesh side returned", gw.url, gwIDs(meanwhile), gw, backend.proc)
	if v := gwMetric(t, gw.url, `fleetmesh_gateway_catchups_total{direction="to_mesh",method="negentropy"}`); v < 1 {
		t.Errorf("negentropy catch-ups to_mesh = %v, want at least 1", v)
	}
	// The catch-up's progress, as fleetmesh status and /metrics tell it:
	// NIP-77 found the 40 events the mesh side lacked, and fetched them.
	if v := gwMetric(t, gw.url, `fleetmesh_gateway_catchup_pending_events{direction="to_mesh"}`); v != 0 {
		t.Errorf("catchup_pending_events{to_mesh} = %v after the catch-up, want 0", v)
	}
	out, errOut, err := cli(t, "status", "--home", home)
	want := fmt.Sprintf("gateway       to_mesh caught up: the last catch-up moved %d events", len(meanwhile))
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "gateway       backend "+backend.url()) {
		t.Errorf("fleetmesh status of the gateway (%v):\n%s%s\nwant a line %q", err, out, errOut, want)
	}
}

// Kill -9 loop bounds.
const (
	gwKillIterations = 3
	gwKillMinAcked   = 15 // OK trues on each side before the kill
)

// TestGatewayKill9 kills the gateway with SIGKILL while events flow both
// ways (the backend requires NIP-42 AUTH for writes), restarts it, and
// checks nothing acknowledged on either side is missing from the other.
func TestGatewayKill9(t *testing.T) {
	backend := startBackend(t, "--negentropy", "--auth-writes")
	home := gwHome(t, "")
	author, _ := newUser()
	backendWriter, _ := newUser()

	var meshAcked, backendAcked []string
	var mu sync.Mutex
	gw := startGateway(t, home, backend)
	for iter := range gwKillIterations {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		counts := [2]int{}
		pump := func(side int, url string, authed bool) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				e := gwSignAt(author, time.Now().Unix(), 1, fmt.Sprintf("iter %d side %d event %d", iter, side, i), nil)
				var m okMessage
				var err error
				if authed {
					m, err = gwPublishAuthed(ctx, url, backendWriter, e)
				} else {
					var oks map[string]okMessage
					oks, err = gwPublish(ctx, url, []*event{e})
					m = oks[e.ID]
				}
				if err != nil {
					if ctx.Err() == nil && side == 0 {
						return // the gateway was killed under us
					}
					continue
				}
				if m.Accepted {
					mu.Lock()
					if side == 0 {
						meshAcked = append(meshAcked, e.ID)
					} else {
						backendAcked = append(backendAcked, e.ID)
					}
					counts[side]++
					mu.Unlock()
				}
			}
		}
		wg.Add(2)
		go pump(0, gw.url, false)
		go pump(1, backend.url(), true)
		deadline := time.Now().Add(gwDeadline)
		for {
			mu.Lock()
			enough := counts[0] >= gwKillMinAcked && counts[1] >= gwKillMinAcked
			mu.Unlock()
			if enough {
				break
			}
			if time.Now().After(deadline) {
				cancel()
				wg.Wait()
				t.Fatalf("iteration %d: too few acknowledgements before the kill: %v\n%s%s", iter, counts, gw.output(), backend.proc.output())
			}
			time.Sleep(20 * time.Millisecond)
		}
		gw.kill()
		cancel()
		wg.Wait()
		gw = startGateway(t, home, backend)
	}
	mu.Lock()
	defer mu.Unlock()
	gwWaitServed(t, "mesh → backend after kill -9", backend.url(), meshAcked, gw, backend.proc)
	gwWaitServed(t, "backend → mesh after kill -9", gw.url, backendAcked, gw, backend.proc)
	t.Logf("%d mesh-side and %d backend-side acknowledged events all crossed across %d kills", len(meshAcked), len(backendAcked), gwKillIterations)
}

// gwPublishAuthed publishes one event to a backend that wants NIP-42 AUTH
// for writes: it answers the challenge as u, then publishes.
func gwPublishAuthed(ctx context.Context, url string, u *user, e *event) (okMessage, error) {
	c, err := dial(ctx, url)
	if err != nil {
		return okMessage{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	send := func(typ string, ev *event) error {
		msg, _ := json.Marshal([]any{typ, ev})
		return c.WriteMessage(websocket.TextMessage, msg)
	}
	if err := send("EVENT", e); err != nil {
		return okMessage{}, err
	}
	authed := false
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return okMessage{}, err
		}
		var msg []json.RawMessage
		if json.Unmarshal(data, &msg) == nil && len(msg) == 2 && string(msg[0]) == `"AUTH"` && !authed {
			var challenge string
			json.Unmarshal(msg[1], &challenge)
			auth := gwSignAt(u, time.Now().Unix(), 22242, "", [][]string{{"relay", url}, {"challenge", challenge}})
			if err := send("AUTH", auth); err != nil {
				return okMessage{}, err
			}
			authed = true
			continue
		}
		m, ok := parseOK(data)
		if !ok || m.ID != e.ID {
			continue
		}
		if !m.Accepted && strings.HasPrefix(m.Message, "auth-required:") && authed {
			if err := send("EVENT", e); err != nil {
				return okMessage{}, err
			}
			authed = false // answer a fresh challenge if one comes
			continue
		}
		return m, nil
	}
}
