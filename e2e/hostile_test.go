package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/identity"
)

// The adversarial suite (spec/limits.md, docs/benchmarks/hostile.md): one
// node, a real process at a file limit of 1,024, serves honest clients on
// 127.0.0.2 to 127.0.0.6 (relay publishers and readers, a DIDComm
// sender) without an attack and during each attack in turn. Each attack
// runs in a process of its own (e2e/attacker, built without the race
// detector, under nice and GOMAXPROCS=1), so that it does not share the
// honest clients' scheduler and garbage collector, and from a loopback
// address of its own (127.0.0.21 and up; a libp2p host on 127.0.0.31 and
// up for the mesh attacks), so that what one attack spent of an address's
// allowances does not weaken the next. The node holds loopback peers to
// the mesh's per-address limits (limit_loopback), as it would a peer on
// the internet.
//
// Each phase runs for a fixed time: hostileShort (CI) or, with
// FLEETMESH_HOSTILE_FULL=1, hostileFull. In the full mode every attack is
// preceded by a baseline phase of the same length, and its ratio is
// against that baseline, so that a machine whose load drifts over the run
// moves both; the short mode takes one baseline at the start. The suite
// prints a table: the attack, what the attacker got, the honest clients'
// success rate and latency during the attack against its baseline, and the
// node's RSS and descriptors.
//
// It asserts what does not depend on the clock: every honest operation
// succeeded, every acknowledged event is served at the end, the node
// never exited nor ran out of descriptors, and each attacker got no more
// than its bound (for the mesh attackers: banned, streams refused, and
// reconnections held to the per-address rate). Latency is reported, never
// asserted.
const (
	hostileShort      = 3 * time.Second
	hostileFull       = 30 * time.Second
	hostileSeedShort  = 5000
	hostileSeedFull   = 20000
	hostileOpTimeout  = 10 * time.Second
	hostileHonestRest = 100 * time.Millisecond
	// hostileAttackerNice is the attacker's nice value: it gets the CPU
	// the node and the honest clients leave.
	hostileAttackerNice = 10
)

// hostileEnv is what the honest clients and the attacks share.
type hostileEnv struct {
	t    *testing.T
	n    *node
	mesh string // the node's mesh multiaddr with /p2p/
	leaf string // a DIDComm recipient the node mediates for
	// pickup is the leaf's mediator client, whose pickups empty the
	// queue the honest forwards fill (as a real leaf's wakes do).
	pickup   *mediation.Client
	node     string // the node's DID
	sender   *didcomm.Packer
	seed     int
	attacker string // the attacker program

	// metrics reads /metrics from 127.0.0.8 on kept-alive connections:
	// a new client per read would leave an idle connection each, and
	// the accept gate counts those against the address.
	metrics *http.Client

	mu    sync.Mutex
	acked []string
}

// phase is one row of the table.
type phase struct {
	name    string
	got     string
	ops     int
	fails   int
	failMsg string
	lat     []time.Duration
	rssKB   int
	fds     int
	// maxSubs is the most live subscriptions the node held.
	maxSubs float64
	base    *phase // the baseline it is compared with
}

func (p *phase) p99() time.Duration { return p.quantile(99) }

// quantile returns the q-th percentile of the honest latencies.
func (p *phase) quantile(q int) time.Duration {
	if len(p.lat) == 0 {
		return 0
	}
	s := slices.Clone(p.lat)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)]
}

func (p *phase) success() float64 {
	if p.ops == 0 {
		return 0
	}
	return 100 * float64(p.ops-p.fails) / float64(p.ops)
}

// attackerResult is what e2e/attacker prints.
type attackerResult struct {
	Got    string           `json:"got"`
	Counts map[string]int64 `json:"counts"`
}

// attackRun is an attack's outcome, for its check.
type attackRun struct {
	res           attackerResult
	dur           time.Duration
	before, after map[string]float64 // hostileSeries
	maxSubs       float64
	seed          int
}

// delta is how much series grew during the attack.
func (r *attackRun) delta(series string) float64 { return r.after[series] - r.before[series] }

// hostileSeries are the node's counters read before and after each
// attack.
var hostileSeries = []string{
	"fleetmesh_mesh_peers_banned_total",
	"fleetmesh_mesh_banned_connections_refused_total",
	`fleetmesh_mesh_misbehavior_total{reason="invalid_gossip"}`,
	`fleetmesh_mesh_misbehavior_total{reason="streams_over_limit"}`,
	`fleetmesh_mesh_misbehavior_total{reason="pex_flood"}`,
	`fleetmesh_mesh_misbehavior_total{reason="pex_violation"}`,
}

// attack names one of e2e/attacker's attacks and the bound its outcome
// must keep; check returns a violation, or "".
type attack struct {
	name  string
	arg   string
	from  string // the loopback address it comes from
	check func(r *attackRun) string
}

// Bounds the checks use: the node's defaults (spec/limits.md).
const (
	boundConnsPerIP   = 64
	boundAcceptPerIP  = 64 + 8
	boundIPSubs       = 256
	boundIPRowsPerSec = 10_000
	boundWorkBurst    = 4 // seconds
	boundAddrConnRate = 0.2
	boundAddrConnBurs = 16
	boundGossipPerBan = 20 // invalid events (weight 0.5) to a score of 10
)

// meshConnectBound is the most connections one address may get in dur
// under the mesh's per-address rate.
func meshConnectBound(dur time.Duration) int64 {
	return boundAddrConnBurs + int64(boundAddrConnRate*dur.Seconds()) + 1
}

var hostileAttacks = []attack{
	{"connection flood", "conn-flood", "127.0.0.21", func(r *attackRun) string {
		if held := r.res.Counts["held"]; held > boundConnsPerIP {
			return fmt.Sprintf("%d WebSocket connections from one address, over the cap of %d", held, boundConnsPerIP)
		}
		return ""
	}},
	{"slowloris", "slowloris", "127.0.0.22", func(r *attackRun) string {
		if open := r.res.Counts["open"]; open > boundAcceptPerIP {
			return fmt.Sprintf("%d half-open connections from one address, over the accept cap of %d", open, boundAcceptPerIP)
		}
		return ""
	}},
	{"subscription flood", "sub-flood", "127.0.0.23", func(r *attackRun) string {
		// The honest readers hold at most one subscription each.
		if r.maxSubs > boundIPSubs+8 {
			return fmt.Sprintf("the node held %g live subscriptions, over one address's cap of %d and the honest clients' few", r.maxSubs, boundIPSubs)
		}
		return ""
	}},
	{"broad-filter REQ loop", "req-loop", "127.0.0.24", func(r *attackRun) string {
		// Rows are charged after each REQ: the burst, the rate, and the
		// eight REQs in flight when the budget ran out.
		bound := int64(boundIPRowsPerSec*(boundWorkBurst+r.dur.Seconds())) + 8*500
		if rows := r.res.Counts["rows"]; rows > bound {
			return fmt.Sprintf("the REQ loop read %d events, over the address's budget of %d", rows, bound)
		}
		return ""
	}},
	{"NEG-OPEN loop over the store", "neg-loop", "127.0.0.25", func(r *attackRun) string {
		// Listings are reserved before they run: one at a time, each
		// while the budget has room, each reading the whole store.
		bound := int64(boundIPRowsPerSec*(boundWorkBurst+r.dur.Seconds()))/int64(r.seed) + 2
		if opened := r.res.Counts["opened"]; opened > bound {
			return fmt.Sprintf("%d NEG-OPENs over %d events each, over the address's budget of %d", opened, r.seed, bound)
		}
		return ""
	}},
	{"oversized and malformed frames", "frames", "127.0.0.26", nil},
	{"DIDComm POST flood, one recipient", "didcomm", "127.0.0.27", func(r *attackRun) string {
		// The per-(address, recipient) bucket: a burst of 20 and 2 a
		// second.
		if bound := 20 + 2*r.res.Counts["seconds"] + 2; r.res.Counts["queued"] > bound {
			return fmt.Sprintf("%d forwards from one address queued for one recipient, over the bound of %d", r.res.Counts["queued"], bound)
		}
		return ""
	}},
	{"mesh peer: streams without end", "streams", "127.0.0.31", func(r *attackRun) string {
		switch {
		case r.res.Counts["refused"] == 0:
			return "no stream of the attacker was refused"
		case r.delta("fleetmesh_mesh_peers_banned_total") < 1:
			return "the attacker was not banned"
		}
		return meshConnects(r)
	}},
	{"mesh peer: PEX descriptors without end", "pex", "127.0.0.32", func(r *attackRun) string {
		if r.delta("fleetmesh_mesh_peers_banned_total") < 1 {
			return "the attacker was not banned"
		}
		return meshConnects(r)
	}},
	{"mesh peer: gossip of invalid events", "gossip", "127.0.0.33", func(r *attackRun) string {
		connects := max(1, r.res.Counts["connects"])
		if bad := r.delta(`fleetmesh_mesh_misbehavior_total{reason="invalid_gossip"}`); bad > float64(boundGossipPerBan*connects) {
			return fmt.Sprintf("%g invalid events reached the validator over %d connections, over %d a connection", bad, connects, boundGossipPerBan)
		}
		return meshConnects(r)
	}},
}

// meshConnects checks a mesh attacker's connections against the
// per-address rate.
func meshConnects(r *attackRun) string {
	if c, bound := r.res.Counts["connects"], meshConnectBound(r.dur); c > bound {
		return fmt.Sprintf("the attacker connected %d times, over the per-address bound of %d", c, bound)
	}
	return ""
}

func TestHostileLoad(t *testing.T) {
	full := os.Getenv("FLEETMESH_HOSTILE_FULL") != ""
	dur, seed := hostileShort, hostileSeedShort
	if full {
		dur, seed = hostileFull, hostileSeedFull
	}
	start := time.Now()
	env := startHostileNode(t)
	env.attacker = buildAttacker(t)
	env.seed = seed
	env.seedStore(seed)
	env.setupMediation()
	t.Logf("node started, attacker built, %d events seeded in %v", seed, time.Since(start).Round(time.Millisecond))

	baseline := func() *phase {
		return env.runPhase("none (baseline)", dur, func(ctx context.Context) string { <-ctx.Done(); return "" })
	}
	var rows []*phase
	base := baseline()
	rows = append(rows, base)
	for _, a := range hostileAttacks {
		if full {
			base = baseline()
		}
		r := &attackRun{dur: dur, seed: seed, before: env.snapshot()}
		p := env.runPhase(a.name, dur, func(context.Context) string {
			// The attacker ends itself after dur.
			r.res = env.runAttacker(a, dur)
			return r.res.Got
		})
		r.after, r.maxSubs = env.snapshot(), p.maxSubs
		p.base = base
		if strings.HasPrefix(a.name, "mesh peer") {
			p.got += fmt.Sprintf("; node: %g banned, %g connections refused at the handshake",
				r.delta("fleetmesh_mesh_peers_banned_total"), r.delta("fleetmesh_mesh_banned_connections_refused_total"))
		}
		rows = append(rows, p)
		if a.check != nil {
			if v := a.check(r); v != "" {
				t.Errorf("%s: %s (counts %v)", a.name, v, r.res.Counts)
			}
		}
		select {
		case <-env.n.exited:
			t.Fatalf("the node exited during %q: %v\n%s", a.name, env.n.err, tail(env.n.output(), 4000))
		default:
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n| attack | what the attacker got | honest success | honest p50 | honest p99 | baseline p99 | ratio | node RSS | node fds |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		ratio, bp99 := "-", time.Duration(0)
		if r.base != nil {
			bp99 = r.base.p99()
			if bp99 > 0 {
				ratio = fmt.Sprintf("%.2fx", float64(r.p99())/float64(bp99))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f%% (%d ops) | %v | %v | %v | %s | %d MiB | %d |\n",
			r.name, r.got, r.success(), r.ops, r.quantile(50).Round(100*time.Microsecond), r.p99().Round(100*time.Microsecond), bp99.Round(100*time.Microsecond), ratio, r.rssKB/1024, r.fds)
	}
	mode := "one baseline at the start"
	if full {
		mode = "a baseline before each attack"
	}
	t.Logf("each phase %v, %s, %d events in the store at the start%s", dur, mode, seed, b.String())

	for _, r := range rows {
		if r.fails > 0 {
			t.Errorf("%s: %d of %d honest operations failed (first: %s)", r.name, r.fails, r.ops, r.failMsg)
		}
	}
	t.Logf("phases done in %v", time.Since(start).Round(time.Millisecond))
	env.checkAcked()
	if out := env.n.output(); strings.Contains(out, "too many open files") {
		t.Errorf("the node ran out of file descriptors:\n%s", tail(out, 4000))
	}
}

// buildAttacker builds e2e/attacker (without the race detector, whatever
// the tests run with) beside the fleetmesh binary.
func buildAttacker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(binary), "attacker")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./e2e/attacker")
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./e2e/attacker: %v\n%s", err, out)
	}
	return bin
}

// runAttacker runs one attack for dur in its own process, at a lower
// priority and on one OS thread, and returns what it printed.
func (env *hostileEnv) runAttacker(a attack, dur time.Duration) attackerResult {
	return env.runProgram(dur, true, "-attack", a.arg, "-from", a.from)
}

// runProgram runs e2e/attacker's name for at most dur, bounded to its
// CPU share if bounded, and returns what it printed.
func (env *hostileEnv) runProgram(dur time.Duration, bounded bool, flags ...string) attackerResult {
	t := env.t
	// The program ends itself after dur; the kill is for one that hangs.
	kctx, cancel := context.WithTimeout(context.Background(), dur+30*time.Second)
	defer cancel()
	args := append([]string{env.attacker, "-duration", dur.String(),
		"-relay", env.n.url, "-http", env.n.httpURL(), "-mesh", env.mesh,
		"-leaf", env.leaf, "-node", env.node, "-seed", strconv.Itoa(env.seed)}, flags...)
	if bounded {
		args = append([]string{"nice", "-n", strconv.Itoa(hostileAttackerNice)}, args...)
	}
	cmd := exec.CommandContext(kctx, args[0], args[1:]...)
	if bounded {
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("attacker %v: %v\n%s", flags, err, tail(stderr.String(), 2000))
		return attackerResult{Got: "attacker failed: " + err.Error()}
	}
	var res attackerResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Errorf("attacker %v printed %q: %v", flags, stdout.String(), err)
	}
	return res
}

// snapshot reads hostileSeries.
func (env *hostileEnv) snapshot() map[string]float64 {
	out := make(map[string]float64, len(hostileSeries))
	for _, s := range hostileSeries {
		out[s], _ = env.metric(s)
	}
	return out
}

// startHostileNode starts a node at a file limit of 1,024, with event
// rate limits off (so the store can be seeded quickly; the limits under
// test are the others) and the mesh listening on loopback.
func startHostileNode(t *testing.T) *hostileEnv {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	// The mesh holds loopback peers to its per-address limits, as it
	// would peers on the internet (spec/limits.md).
	home := newHome(t, nodeConfig(nil)+"\n[mesh]\nlimit_loopback = true\n")
	cmd := exec.Command(prlimit, fmt.Sprintf("--nofile=%d:%d", floodFileLimit, floodFileLimit), "--",
		binary, "run", "--home", home, "--listen", "127.0.0.1:0", "--mesh-listen", "/ip4/127.0.0.1/tcp/0")
	n, err := startNodeCmd(t, home, cmd)
	if err != nil {
		t.Fatal(err)
	}
	env := &hostileEnv{t: t, n: n, node: n.did, metrics: clientFromIP("127.0.0.8")}
	t.Cleanup(env.metrics.CloseIdleConnections)
	deadline := time.Now().Add(startTimeout)
	for env.mesh == "" && time.Now().Before(deadline) {
		for _, line := range strings.Split(n.stdout.String(), "\n") {
			if a, ok := strings.CutPrefix(line, "mesh "); ok && strings.Contains(a, "/p2p/") {
				env.mesh = strings.TrimSpace(a)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if env.mesh == "" {
		t.Fatalf("no mesh address\n%s", n.output())
	}
	return env
}

// seedStore has e2e/attacker publish n events from 127.0.0.9, so that
// broad filters and NEG-OPEN have a store to scan.
func (env *hostileEnv) seedStore(n int) {
	res := env.runProgram(2*time.Minute, false, "-attack", "seed")
	if got := res.Counts["accepted"]; got != int64(n) {
		env.t.Fatalf("seeding: %s", res.Got)
	}
}

// setupMediation makes a leaf that the node mediates for, and a sender
// whose forwards to it are the honest DIDComm traffic.
func (env *hostileEnv) setupMediation() {
	t := env.t
	leafKey, _ := identity.GenerateKey()
	senderKey, _ := identity.GenerateKey()
	packerOf := func(k *identity.Key) (*didcomm.Packer, *didcomm.Unpacker) {
		s, err := didcomm.SecretsFromKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return &didcomm.Packer{Secrets: s, Resolver: didcomm.DIDKeyResolver{}}, &didcomm.Unpacker{Secrets: s, Resolver: didcomm.DIDKeyResolver{}}
	}
	lp, lu := packerOf(leafKey)
	env.sender, _ = packerOf(senderKey)
	seen, err := mediation.OpenSeen(t.TempDir(), mediation.DefaultMaxSeen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seen.Close() })
	hc := clientFromIP("127.0.0.7")
	t.Cleanup(hc.CloseIdleConnections)
	url := env.n.httpURL() + "/didcomm"
	ex := func(ctx context.Context, packed []byte) ([]byte, error) {
		out, err := transport.PostHTTP(ctx, hc, url, packed)
		if err != nil && out != nil {
			return out, nil
		}
		return out, err
	}
	client := &mediation.Client{Packer: lp, Unpacker: lu, Mediator: env.node, Exchange: ex, Seen: seen}
	ctx := context.Background()
	if _, err := client.RequestMediation(ctx); err != nil {
		t.Fatalf("mediation: %v", err)
	}
	if _, err := client.UpdateRecipients(ctx, mediation.Update{RecipientDID: leafKey.DID(), Action: "add"}); err != nil {
		t.Fatalf("recipient update: %v", err)
	}
	env.leaf = leafKey.DID()
	env.pickup = client
}

// honestPickup empties the leaf's queue every 2 s, as the leaf's wakes
// would: without it the honest forwards, two a second, fill the queue's
// bound of 1,000 in a full run, and the mediator then answers them
// queue-full (503), which is the bound working, not an attack. Pickups
// are not measured.
func (env *hostileEnv) honestPickup(ctx context.Context) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, hostileOpTimeout)
		env.pickup.Collect(cctx, 100, func(string, []byte) error { return nil })
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// clientFromIP is an HTTP client whose connections leave from ip.
func clientFromIP(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Timeout: hostileOpTimeout, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
}

// forward packs a forward of a fresh message to the leaf.
func (env *hostileEnv) forward(i int) []byte {
	m, _ := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": fmt.Sprint("m ", i)})
	m.To = []string{env.leaf}
	inner, err := env.sender.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAnoncrypt})
	if err != nil {
		env.t.Fatal(err)
	}
	fwd, err := routing.Route(env.sender, inner, env.leaf, env.node)
	if err != nil {
		env.t.Fatal(err)
	}
	return fwd
}

// runPhase runs the honest clients for dur, and during (an attack, or
// nothing) beside them; during returns what the attacker got.
func (env *hostileEnv) runPhase(name string, dur time.Duration, during func(ctx context.Context) string) *phase {
	p := &phase{name: name}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var mu sync.Mutex
	record := func(d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		p.ops++
		if err != nil {
			p.fails++
			if p.failMsg == "" {
				p.failMsg = err.Error()
			}
			return
		}
		p.lat = append(p.lat, d)
	}
	var wg sync.WaitGroup
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		wg.Go(func() { env.honestRelay(ctx, ip, record) })
	}
	wg.Go(func() { env.honestDIDComm(ctx, "127.0.0.6", record) })
	wg.Go(func() { env.honestPickup(ctx) })
	wg.Go(func() {
		for ctx.Err() == nil {
			rss, fds := procStats(env.n.cmd.Process.Pid)
			subs, _ := env.metric("fleetmesh_relay_subscriptions")
			mu.Lock()
			p.rssKB, p.fds, p.maxSubs = max(p.rssKB, rss), max(p.fds, fds), max(p.maxSubs, subs)
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	got := during(ctx)
	wg.Wait()
	p.got = got
	env.settle()
	return p
}

// settle waits (bounded) until the attacker's connections are gone, so
// the next phase starts clean.
func (env *hostileEnv) settle() {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if v, ok := env.metric("fleetmesh_relay_connections"); ok && v <= 1 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// honestRelay publishes an event and reads it back, over and over, from
// ip, on one connection (a new one after a failure).
func (env *hostileEnv) honestRelay(ctx context.Context, ip string, record func(time.Duration, error)) {
	u, _ := newUser()
	var c *websocket.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		if c == nil {
			start := time.Now()
			var err error
			if c, _, err = dialFrom(context.Background(), env.n.url, ip); err != nil {
				record(0, fmt.Errorf("connect from %s: %w", ip, err))
				c = nil
				time.Sleep(hostileHonestRest)
				continue
			}
			record(time.Since(start), nil)
		}
		e, _ := u.sign(1, randomContent("honest "+ip), nil)
		c.SetReadDeadline(time.Now().Add(hostileOpTimeout))
		start := time.Now()
		ok, err := publishOne(c, e)
		if err == nil && !ok.Accepted {
			err = fmt.Errorf("OK false: %s", ok.Message)
		}
		if err != nil {
			record(0, fmt.Errorf("publish from %s: %w", ip, err))
			c.Close()
			c = nil
			continue
		}
		record(time.Since(start), nil)
		env.mu.Lock()
		env.acked = append(env.acked, e.ID)
		env.mu.Unlock()
		start = time.Now()
		got, err := storedEvents(c, fmt.Sprint("h", i), map[string]any{"ids": []string{e.ID}})
		if err == nil && (len(got) != 1 || got[0].ID != e.ID) {
			err = fmt.Errorf("read back %d events", len(got))
		}
		if err != nil {
			record(0, fmt.Errorf("read from %s: %w", ip, err))
			c.Close()
			c = nil
			continue
		}
		record(time.Since(start), nil)
		time.Sleep(hostileHonestRest)
	}
}

// honestDIDComm forwards a message to the leaf every 500 ms from ip,
// below the per-(address, recipient) rate.
func (env *hostileEnv) honestDIDComm(ctx context.Context, ip string, record func(time.Duration, error)) {
	hc := clientFromIP(ip)
	defer hc.CloseIdleConnections()
	url := env.n.httpURL() + "/didcomm"
	for i := 0; ctx.Err() == nil; i++ {
		fwd := env.forward(i)
		start := time.Now()
		res, err := hc.Post(url, didcomm.MediaTypeEncrypted, bytes.NewReader(fwd))
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusAccepted {
				err = fmt.Errorf("HTTP %d", res.StatusCode)
			}
		}
		if err != nil {
			record(0, fmt.Errorf("DIDComm forward from %s: %w", ip, err))
		} else {
			record(time.Since(start), nil)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkAcked fetches every acknowledged event back.
func (env *hostileEnv) checkAcked() {
	env.mu.Lock()
	ids := slices.Clone(env.acked)
	env.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _, err := dialFrom(ctx, env.n.url, "127.0.0.8")
	if err != nil {
		env.t.Fatal(err)
	}
	defer c.Close()
	found := 0
	for start := 0; start < len(ids); start += 100 {
		part := ids[start:min(start+100, len(ids))]
		for {
			got, err := storedEvents(c, fmt.Sprint("chk", start), map[string]any{"ids": part, "limit": len(part)})
			if err != nil && strings.Contains(err.Error(), "rate-limited") {
				time.Sleep(500 * time.Millisecond)
				continue
			}
			if err != nil {
				env.t.Fatal(err)
			}
			found += len(got)
			break
		}
	}
	if found != len(ids) {
		env.t.Errorf("%d of %d acknowledged events are served after the attacks", found, len(ids))
	}
}

// metric reads one unlabelled (or fully written) series from /metrics.
func (env *hostileEnv) metric(series string) (float64, bool) {
	res, err := env.metrics.Get(env.n.httpURL() + "/metrics")
	if err != nil {
		return 0, false
	}
	defer func() {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// procStats reads a process's resident memory (KiB) and open descriptors.
func procStats(pid int) (rssKB, fds int) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rssKB, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	return rssKB, openFDs(pid)
}
