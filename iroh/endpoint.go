package iroh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// Handler serves one accepted stream. It owns s and closes it.
type Handler func(s *Stream)

// Config configures an Endpoint.
type Config struct {
	// Key is the node's identity; its public key is the EndpointId.
	Key *identity.Key
	// HelperDir holds helper.mjs and its installed node_modules (`npm
	// install --no-save` from its lock file).
	HelperDir string
	// Node is the Node.js executable (a name on PATH or a path).
	Node string
	// SocketDir is where the helper socket is made (mode 0700): the node
	// home's iroh directory.
	SocketDir string
	// Relays are iroh relay URLs; none means relays are off.
	Relays []string
	// Bind are the UDP socket addresses the endpoint binds; none binds an
	// ephemeral port on all interfaces.
	Bind []string
	// Handlers serve accepted streams by ALPN; the ALPNs are the ones the
	// endpoint accepts.
	Handlers map[string]Handler
	// OnReady is called each time the helper serves (after every start
	// and restart) with its addresses.
	OnReady func(Info)
	// Limits bound what remote endpoints may open; a zero field takes
	// DefaultLimits' value.
	Limits Limits
	// OnRefused, if set, is told of connections and streams refused over
	// Limits (or from a banned endpoint): the remote EndpointId ("" before
	// the handshake named it), the reason (one of the Refused* constants)
	// and how many since the last call. It must not block.
	OnRefused func(remote, reason string, n uint64)
	Log       *slog.Logger
}

// Limits bound what remote endpoints may open on this one (spec/limits.md,
// "iroh peers"). The helper applies them as connections and streams
// arrive; the node checks the stream bounds again as streams reach it.
type Limits struct {
	// Streams bounds the streams open at once, both ways: each is a
	// socket between the node and the helper, so this is the file
	// budget's iroh share (relay.FileBudget.Iroh).
	Streams int
	// StreamsPerPeer bounds the inbound streams one remote endpoint has
	// open, over all its connections; StreamsPerProtocol those on one
	// ALPN, which is also each inbound connection's QUIC stream credit.
	StreamsPerPeer     int
	StreamsPerProtocol int
	// Conns bounds the inbound connections, handshakes included;
	// ConnsPerPeer those of one remote endpoint.
	Conns        int
	ConnsPerPeer int
}

// DefaultLimits are the bounds a zero Limits field takes.
func DefaultLimits() Limits {
	return Limits{Streams: 256, StreamsPerPeer: 16, StreamsPerProtocol: 8, Conns: 1024, ConnsPerPeer: 8}
}

func (l Limits) fill() Limits {
	d := DefaultLimits()
	for _, f := range []struct{ v, def *int }{
		{&l.Streams, &d.Streams}, {&l.StreamsPerPeer, &d.StreamsPerPeer}, {&l.StreamsPerProtocol, &d.StreamsPerProtocol},
		{&l.Conns, &d.Conns}, {&l.ConnsPerPeer, &d.ConnsPerPeer},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// Reasons a connection or stream is refused (Config.OnRefused,
// Stats.Refused).
const (
	RefusedStreams         = "streams"          // Limits.Streams: the node's share of files
	RefusedPeerStreams     = "peer_streams"     // Limits.StreamsPerPeer
	RefusedProtocolStreams = "protocol_streams" // Limits.StreamsPerProtocol
	RefusedConns           = "conns"            // Limits.Conns
	RefusedPeerConns       = "peer_conns"       // Limits.ConnsPerPeer
	RefusedBanned          = "banned"           // an endpoint the node banned (Ban)
)

// RefusedReasons lists every reason, for metrics.
var RefusedReasons = []string{RefusedStreams, RefusedPeerStreams, RefusedProtocolStreams, RefusedConns, RefusedPeerConns, RefusedBanned}

// ErrBusy is returned by Dial when Limits.Streams streams are open.
var ErrBusy = errors.New("iroh: the node's iroh streams are at their bound (the file budget's iroh share)")

// Info is what the endpoint serves at.
type Info struct {
	// ID is the EndpointId (64 hex digits).
	ID string
	// Addrs are the direct socket addresses (host:port).
	Addrs []string
	// Relay is the home relay URL, empty without relays.
	Relay string
}

// Addr is how to reach a remote endpoint: its id, and any relay URL and
// direct addresses known for it (iroh needs one of them: there is no
// discovery service).
type Addr struct {
	ID    string
	Relay string
	Addrs []string
}

// Restart backoff of the supervisor.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 10 * time.Second
	// healthyAfter is how long a helper must serve before its next crash
	// starts the backoff from minBackoff again.
	healthyAfter = 30 * time.Second
	// startTimeout bounds a helper's start: connect, bind, ready.
	startTimeout = 30 * time.Second
	// maxStartFailures is how many starts in a row may end before the
	// helper serves: then the supervisor stops trying (Failed) until the
	// node restarts. A helper that served and crashed is always restarted.
	maxStartFailures = 5
	// checkTimeout bounds `node helper.mjs --check` (Check).
	checkTimeout = 30 * time.Second
	// stderrTail bounds what is kept of a helper's standard error, for the
	// cause of its exit.
	stderrTail = 4096
	// headerTimeout bounds the first line of a socket connection.
	headerTimeout = 10 * time.Second
)

// ErrUnavailable wraps every reason the endpoint cannot run at all (no
// Node.js, no helper, no binding): the node runs without iroh.
var ErrUnavailable = errors.New("iroh unavailable")

// ErrDown is returned by Dial while the helper is not serving (it is
// being restarted).
var ErrDown = errors.New("iroh: the helper is not serving")

// Endpoint is the node's iroh endpoint: a supervised helper process and
// the streams it carries.
type Endpoint struct {
	cfg  Config
	log  *slog.Logger
	ln   *net.UnixListener
	path string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	token    string
	ctl      *net.UnixConn // the current control connection, nil while down
	ctlCh    chan *net.UnixConn
	info     Info
	serving  bool
	nextReq  uint64
	pending  map[uint64]chan dialResult
	conns    map[uint64]ConnInfo
	restarts uint64
	// failed is why the supervisor stopped starting the helper, nil while
	// it has not.
	failed   error
	streams  map[string]uint64 // by "in"/"out"
	dialErrs uint64
	// open counts the stream sockets open, both ways; inByPeer and
	// inByProto the inbound ones by remote and by remote and ALPN.
	open      int
	inByPeer  map[string]int
	inByProto map[[2]string]int
	refused   map[string]uint64
	// banned are remote endpoints refused until a time (Ban), bounded by
	// maxBanned.
	banned map[string]time.Time
	// rebind are the sockets the last helper bound: a restarted helper
	// binds them again, so peers that know its addresses still reach it.
	rebind []string
}

// ConnInfo is one open iroh connection, as the helper reports it.
type ConnInfo struct {
	Remote string
	ALPN   string
	// Dir is "in" or "out".
	Dir string
	// Path is the selected path: "direct", "relay" or "none".
	Path string
}

type dialResult struct {
	s   *Stream
	err error
}

// Check reports why the endpoint cannot run with cfg, wrapping
// ErrUnavailable, or nil. Beyond the files, it runs `node helper.mjs
// --check` in the helper directory, which loads the native binding as the
// helper would: a Node.js older than the binding needs, a platform the
// binding has no build for, or a binding that is missing or does not load
// are named with their fix.
func Check(cfg Config) error {
	if !Bound(runtime.GOOS, runtime.GOARCH) {
		return fmt.Errorf("%w: @number0/iroh has no native binding for %s/%s (the npm registry serves %s only): this node runs on libp2p and reaches iroh nodes through an anchor that speaks both (spec/iroh.md, \"Platforms without a binding\"); [iroh] enabled = false says so without this line",
			ErrUnavailable, runtime.GOOS, runtime.GOARCH, strings.Join(boundPlatforms, " and "))
	}
	node := cfg.Node
	if node == "" {
		node = "node"
	}
	if _, err := exec.LookPath(node); err != nil {
		return fmt.Errorf("%w: Node.js %q not found (install Node.js %s or later, or set [iroh] node): %v", ErrUnavailable, node, MinNode, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.HelperDir, "helper.mjs")); err != nil {
		return fmt.Errorf("%w: no helper.mjs in %s (set [iroh] helper_dir to an iroh/helper directory: a release archive's, the container's, or the fleetmesh source's after `npm install --no-save` there)", ErrUnavailable, cfg.HelperDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "helper.mjs", "--check")
	cmd.Dir = cfg.HelperDir
	var stderr tail
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct {
		OK  bool   `json:"ok"`
		Why string `json:"why"`
	}
	if jerr := json.Unmarshal(bytes.TrimSpace(out), &res); jerr != nil {
		cause := stderr.last()
		if cause == "" {
			cause = fmt.Sprint(err)
		}
		return fmt.Errorf("%w: `%s helper.mjs --check` in %s failed: %s", ErrUnavailable, node, cfg.HelperDir, cause)
	}
	if !res.OK {
		return fmt.Errorf("%w: %s", ErrUnavailable, res.Why)
	}
	return nil
}

// boundPlatforms are the GOOS/GOARCH pairs @number0/iroh 1.1.0 has a
// native binding for on the npm registry (its package.json names more,
// which the registry does not serve).
var boundPlatforms = []string{"linux/amd64", "darwin/arm64"}

// Bound reports whether the helper's binding exists for goos/goarch.
func Bound(goos, goarch string) bool {
	return slices.Contains(boundPlatforms, goos+"/"+goarch)
}

// MinNode is the oldest Node.js the helper's binding runs on (the engines
// field of @number0/iroh 1.1.0).
const MinNode = "20.3"

// tail keeps the last stderrTail bytes written to it: a helper's standard
// error, whose last line is the cause of its exit.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrTail {
		t.buf = t.buf[len(t.buf)-stderrTail:]
	}
	return len(p), nil
}

// last is the last non-empty line written.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Start checks cfg, makes the helper socket and starts supervising the
// helper. It returns before the helper serves; OnReady says when.
func Start(cfg Config) (*Endpoint, error) {
	if cfg.Node == "" {
		cfg.Node = "node"
	}
	if err := Check(cfg); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.SocketDir, 0o700); err != nil {
		return nil, fmt.Errorf("iroh: %w", err)
	}
	if err := os.Chmod(cfg.SocketDir, 0o700); err != nil {
		return nil, fmt.Errorf("iroh: %w", err)
	}
	path := filepath.Join(cfg.SocketDir, "helper.sock")
	_ = os.Remove(path) // left by a node that was killed
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("iroh: helper socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("iroh: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Endpoint{
		cfg: cfg, log: cfg.Log, ln: ln, path: path, ctx: ctx, cancel: cancel,
		ctlCh:    make(chan *net.UnixConn, 1),
		pending:  make(map[uint64]chan dialResult),
		conns:    make(map[uint64]ConnInfo),
		streams:  make(map[string]uint64),
		inByPeer: make(map[string]int), inByProto: make(map[[2]string]int),
		refused: make(map[string]uint64), banned: make(map[string]time.Time),
	}
	e.cfg.Limits = cfg.Limits.fill()
	e.wg.Add(2)
	go func() { defer e.wg.Done(); e.acceptLoop() }()
	go func() { defer e.wg.Done(); e.supervise() }()
	return e, nil
}

// Close stops the helper and waits for the endpoint's goroutines.
func (e *Endpoint) Close() error {
	e.cancel()
	err := e.ln.Close()
	e.wg.Wait()
	_ = os.Remove(e.path)
	return err
}

// ID is the EndpointId.
func (e *Endpoint) ID() string { return e.cfg.Key.EndpointID() }

// Info is where the endpoint serves, and whether it does now.
func (e *Endpoint) Info() (Info, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info, e.serving
}

// Failed is why the supervisor stopped starting the helper
// (maxStartFailures starts in a row ended before it served), wrapping
// ErrUnavailable; nil while it has not given up.
func (e *Endpoint) Failed() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

// Conns lists the open iroh connections.
func (e *Endpoint) Conns() []ConnInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]ConnInfo, 0, len(e.conns))
	for _, c := range e.conns {
		out = append(out, c)
	}
	return out
}

// Connected reports whether an iroh connection to the endpoint id is open,
// and whether its path is direct.
func (e *Endpoint) Connected(id string) (open, direct bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.conns {
		if c.Remote == id {
			open = true
			direct = direct || c.Path == "direct"
		}
	}
	return open, direct
}

// Stats are the endpoint's counters.
type Stats struct {
	Restarts   uint64
	StreamsIn  uint64
	StreamsOut uint64
	DialErrors uint64
	// OpenStreams are the stream sockets open now, both ways.
	OpenStreams int
	// Refused counts refused connections and streams by reason.
	Refused map[string]uint64
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{Restarts: e.restarts, StreamsIn: e.streams["in"], StreamsOut: e.streams["out"], DialErrors: e.dialErrs,
		OpenStreams: e.open, Refused: maps.Clone(e.refused)}
}

// Limits are the bounds in use, defaults filled in.
func (e *Endpoint) Limits() Limits { return e.cfg.Limits }

// maxBanned bounds the endpoints Ban remembers; the soonest to end is
// forgotten first.
const maxBanned = 4096

// Ban refuses the remote endpoint id until the time given: the helper
// closes its connections and refuses new ones, and the node refuses its
// streams. The node bans an endpoint its misbehaviour score banned.
func (e *Endpoint) Ban(id string, until time.Time) {
	e.mu.Lock()
	if old, ok := e.banned[id]; ok && !until.After(old) {
		e.mu.Unlock()
		return
	}
	if len(e.banned) >= maxBanned {
		var first string
		for k, t := range e.banned {
			if first == "" || t.Before(e.banned[first]) {
				first = k
			}
		}
		delete(e.banned, first)
	}
	e.banned[id] = until
	ctl, serving := e.ctl, e.serving
	e.mu.Unlock()
	if serving && ctl != nil {
		if err := writeMsg(ctl, msg{T: "ban", ID: id, Until: until.UnixMilli()}); err != nil {
			e.log.Warn("iroh: tell the helper of a ban", "err", err)
		}
	}
}

// isBanned reports whether id is banned now; e.mu is held.
func (e *Endpoint) isBanned(id string) bool {
	until, ok := e.banned[id]
	if ok && time.Now().After(until) {
		delete(e.banned, id)
		return false
	}
	return ok
}

// refuse counts a refusal and tells Config.OnRefused.
func (e *Endpoint) refuse(remote, reason string, n uint64) {
	e.mu.Lock()
	e.refused[reason] += n
	e.mu.Unlock()
	if e.cfg.OnRefused != nil {
		e.cfg.OnRefused(remote, reason, n)
	}
}

// Dial opens a bi-stream to a over alpn, reusing an open connection.
func (e *Endpoint) Dial(ctx context.Context, a Addr, alpn string) (*Stream, error) {
	if _, err := identity.PublicKeyFromEndpointID(a.ID); err != nil {
		return nil, fmt.Errorf("iroh: dial: %w", err)
	}
	ch := make(chan dialResult, 1)
	e.mu.Lock()
	if !e.serving {
		e.mu.Unlock()
		return nil, ErrDown
	}
	if e.open >= e.cfg.Limits.Streams {
		e.mu.Unlock()
		return nil, ErrBusy
	}
	// The slot is the stream's from here; released unless a stream
	// takes it.
	e.open++
	taken := false
	defer func() {
		if !taken {
			e.mu.Lock()
			e.open--
			e.mu.Unlock()
		}
	}()
	e.nextReq++
	req := e.nextReq
	e.pending[req] = ch
	ctl := e.ctl
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.pending, req)
		e.mu.Unlock()
		// A stream that arrived after ctx ended is not anyone's.
		select {
		case r := <-ch:
			if r.s != nil && ctx.Err() != nil {
				r.s.Close()
			}
		default:
		}
	}()
	if err := writeMsg(ctl, msg{T: "dial", Req: req, ID: a.ID, ALPN: alpn, Relay: a.Relay, Addrs: a.Addrs}); err != nil {
		return nil, fmt.Errorf("iroh: dial %s: %w", a.ID, ErrDown)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			e.mu.Lock()
			e.dialErrs++
			e.mu.Unlock()
			return nil, r.err
		}
		e.mu.Lock()
		e.streams["out"]++
		e.mu.Unlock()
		taken = true
		r.s.release = e.releaseOut
		return r.s, nil
	case <-ctx.Done():
		// A stream that arrives later finds no pending entry and is closed.
		return nil, fmt.Errorf("iroh: dial %s: %w", a.ID, ctx.Err())
	}
}

// acceptLoop takes every connection to the helper socket, reads its first
// line and routes it: the control channel to the supervisor, a stream to
// its dial or its ALPN's handler.
func (e *Endpoint) acceptLoop() {
	for {
		c, err := e.ln.AcceptUnix()
		if err != nil {
			return
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.route(c)
		}()
	}
}

func (e *Endpoint) route(c *net.UnixConn) {
	_ = c.SetReadDeadline(time.Now().Add(headerTimeout))
	r := newLineReader(c)
	m, err := readMsg(r)
	e.mu.Lock()
	token := e.token
	e.mu.Unlock()
	if err != nil || token == "" || m.Token != token {
		e.log.Debug("iroh: refused a helper socket connection", "err", err)
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	switch m.T {
	case "control":
		select {
		case e.ctlCh <- c:
		default:
			c.Close() // a second control channel
		}
		return
	case "stream":
	default:
		c.Close()
		return
	}
	s := &Stream{c: c, r: r, alpn: m.ALPN, remote: m.Remote}
	if m.Req != 0 {
		e.mu.Lock()
		ch := e.pending[m.Req]
		e.mu.Unlock()
		if ch == nil {
			c.Close()
			return
		}
		select {
		case ch <- dialResult{s: s}:
		default:
			c.Close()
		}
		return
	}
	h := e.cfg.Handlers[m.ALPN]
	if h == nil {
		c.Close()
		return
	}
	if _, err := identity.PublicKeyFromEndpointID(m.Remote); err != nil {
		c.Close()
		return
	}
	if why := e.admit(m.Remote, m.ALPN); why != "" {
		c.Close()
		e.refuse(m.Remote, why, 1)
		return
	}
	s.release = func() { e.releaseIn(m.Remote, m.ALPN) }
	h(s)
}

// admit takes a slot for an inbound stream from remote on alpn, or says
// why not. The helper refuses first; this holds the bounds if it did
// not.
func (e *Endpoint) admit(remote, alpn string) string {
	l := e.cfg.Limits
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.isBanned(remote):
		return RefusedBanned
	case e.open >= l.Streams:
		return RefusedStreams
	case e.inByPeer[remote] >= l.StreamsPerPeer:
		return RefusedPeerStreams
	case e.inByProto[[2]string{remote, alpn}] >= l.StreamsPerProtocol:
		return RefusedProtocolStreams
	}
	e.open++
	e.inByPeer[remote]++
	e.inByProto[[2]string{remote, alpn}]++
	e.streams["in"]++
	return ""
}

func (e *Endpoint) releaseIn(remote, alpn string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.open--
	if e.inByPeer[remote]--; e.inByPeer[remote] <= 0 {
		delete(e.inByPeer, remote)
	}
	k := [2]string{remote, alpn}
	if e.inByProto[k]--; e.inByProto[k] <= 0 {
		delete(e.inByProto, k)
	}
}

func (e *Endpoint) releaseOut() {
	e.mu.Lock()
	e.open--
	e.mu.Unlock()
}

// supervise runs the helper, and runs it again with backoff whenever it
// exits or its control channel breaks, until Close; or until
// maxStartFailures starts in a row ended before the helper served: then it
// logs one ERROR with the cause and stops (Failed).
func (e *Endpoint) supervise() {
	backoff := minBackoff
	failures := 0
	for e.ctx.Err() == nil {
		started := time.Now()
		served, err := e.runOnce()
		if e.ctx.Err() != nil {
			return
		}
		if time.Since(started) > healthyAfter {
			backoff = minBackoff
		}
		if served {
			failures = 0
		} else if failures++; failures >= maxStartFailures {
			e.mu.Lock()
			e.failed = fmt.Errorf("%w: the helper did not start %d times in a row: %v", ErrUnavailable, failures, err)
			e.mu.Unlock()
			e.log.Error("iroh off: the helper cannot start; the node runs on libp2p alone and tries again only when it restarts",
				"attempts", failures, "why", err.Error())
			return
		}
		e.mu.Lock()
		e.restarts++
		e.mu.Unlock()
		e.log.Warn("iroh: helper stopped; restarting", "err", err, "in", backoff)
		select {
		case <-e.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// runOnce starts one helper process and serves through it until it ends.
// served says whether the helper got as far as serving (ready).
func (e *Endpoint) runOnce() (served bool, err error) {
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	e.mu.Lock()
	e.token = token
	e.mu.Unlock()
	cmd := exec.Command(e.cfg.Node, "helper.mjs")
	cmd.Dir = e.cfg.HelperDir
	cmd.Env = append(os.Environ(), "FLEETMESH_IROH_SOCK="+e.path, "FLEETMESH_IROH_TOKEN="+token)
	// The helper writes only why it exits; that line is the cause the
	// errors below carry, so it is logged with them, not as it comes.
	var stderr tail
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start helper: %w", err)
	}
	// exited is closed once the process is reaped; waitErr is then set.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	exitErr := func(what string) error {
		if why := stderr.last(); why != "" {
			return fmt.Errorf("%s: %v: %s", what, waitErr, why)
		}
		return fmt.Errorf("%s: %v", what, waitErr)
	}
	defer func() {
		e.mu.Lock()
		served = e.serving
		e.mu.Unlock()
		e.down()
		_ = cmd.Process.Kill()
		<-exited
	}()

	var ctl *net.UnixConn
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case ctl = <-e.ctlCh:
	case <-exited:
		return false, exitErr("helper exited before connecting")
	case <-timer.C:
		return false, errors.New("helper did not connect in time")
	case <-e.ctx.Done():
		return false, nil
	}
	defer ctl.Close()
	alpns := make([]string, 0, len(e.cfg.Handlers))
	for a := range e.cfg.Handlers {
		alpns = append(alpns, a)
	}
	slices.Sort(alpns)
	seed := e.cfg.Key.PrivateKey().Seed()
	e.mu.Lock()
	bind, relays := e.cfg.Bind, e.cfg.Relays
	if e.rebind != nil {
		bind = e.rebind
		// Cleared until this helper serves: if the sockets are taken, the
		// next start binds afresh.
		e.rebind = nil
	}
	// A restarted helper keeps refusing the banned endpoints.
	var bans []msg
	for id, until := range e.banned {
		bans = append(bans, msg{T: "ban", ID: id, Until: until.UnixMilli()})
	}
	e.mu.Unlock()
	l := e.cfg.Limits
	lim := &wireLimits{Streams: l.Streams, StreamsPerPeer: l.StreamsPerPeer, StreamsPerProtocol: l.StreamsPerProtocol, Conns: l.Conns, ConnsPerPeer: l.ConnsPerPeer}
	if err := writeMsg(ctl, msg{T: "config", Key: hex.EncodeToString(seed), ALPNs: alpns, Relays: relays, Bind: bind, Limits: lim}); err != nil {
		return false, fmt.Errorf("configure helper: %w", err)
	}
	for _, b := range bans {
		if err := writeMsg(ctl, b); err != nil {
			return false, fmt.Errorf("configure helper: %w", err)
		}
	}
	lines := make(chan msg)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		r := newLineReader(ctl)
		for {
			m, err := readMsg(r)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case lines <- m:
			case <-done:
				return
			}
		}
	}()
	for {
		select {
		case <-e.ctx.Done():
			_ = writeMsg(ctl, msg{T: "close"})
			select {
			case <-exited:
			case <-time.After(2 * time.Second):
			}
			return false, nil
		case <-exited:
			return false, exitErr("helper exited")
		case err := <-readErr:
			// The helper closes its end as it exits: its own cause, if
			// it is gone by then, says more than the broken channel.
			select {
			case <-exited:
				return false, exitErr("helper exited")
			case <-time.After(time.Second):
			}
			return false, fmt.Errorf("control channel: %w", err)
		case <-timer.C:
			e.mu.Lock()
			serving := e.serving
			e.mu.Unlock()
			if !serving {
				return false, errors.New("helper did not bind in time")
			}
		case m := <-lines:
			e.handleControl(ctl, m)
		}
	}
}

func (e *Endpoint) handleControl(ctl *net.UnixConn, m msg) {
	e.mu.Lock()
	switch m.T {
	case "ready", "addr":
		e.info = Info{ID: m.ID, Addrs: m.Addrs, Relay: m.Relay}
		if len(m.Bound) > 0 {
			e.rebind = m.Bound
		}
		first := !e.serving
		e.serving, e.ctl = true, ctl
		info := e.info
		e.mu.Unlock()
		if m.ID != e.ID() {
			e.log.Error("iroh: helper serves another EndpointId", "want", e.ID(), "got", m.ID)
		}
		if first {
			e.log.Info("iroh: serving", "endpoint_id", info.ID, "addrs", info.Addrs, "relay", info.Relay)
			if e.cfg.OnReady != nil {
				e.cfg.OnReady(info)
			}
		}
		return
	case "dialerr":
		if ch := e.pending[m.Req]; ch != nil {
			ch <- dialResult{err: fmt.Errorf("iroh: dial: %s", m.Err)}
		}
	case "conn":
		e.conns[m.CID] = ConnInfo{Remote: m.Remote, ALPN: m.ALPN, Dir: m.Dir, Path: m.Path}
	case "path":
		if c, ok := e.conns[m.CID]; ok {
			c.Path = m.Path
			e.conns[m.CID] = c
		}
	case "closed":
		delete(e.conns, m.CID)
	case "refused":
		e.mu.Unlock()
		if slices.Contains(RefusedReasons, m.Why) && m.N > 0 {
			e.refuse(m.Remote, m.Why, m.N)
		}
		return
	case "error":
		e.log.Warn("iroh: helper", "err", m.Err)
	}
	e.mu.Unlock()
}

// down marks the helper gone: dials in flight fail, connections are
// forgotten (the helper's death closed them).
func (e *Endpoint) down() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.serving, e.ctl, e.token = false, nil, ""
	for req, ch := range e.pending {
		select {
		case ch <- dialResult{err: ErrDown}:
		default:
		}
		delete(e.pending, req)
	}
	clear(e.conns)
}
