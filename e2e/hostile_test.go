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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multiaddr"
	"github.com/multiformats/go-varint"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/mediator"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/nostr"
)

// The adversarial suite (spec/limits.md, docs/benchmarks/hostile.md): one
// node, a real process at a file limit of 1,024, serves honest clients on
// 127.0.0.2 to 127.0.0.6 (relay publishers and readers, a DIDComm
// sender) first alone, then during each attack in turn, from 127.0.0.1 or
// from a libp2p host in this process. Each phase runs for a fixed time:
// hostileShort (CI) or, with FLEETMESH_HOSTILE_FULL=1, hostileFull. It
// prints a table: the attack, what the attacker got, the honest clients'
// success rate and p99 latency during the attack against the baseline,
// and the node's RSS and descriptors.
//
// It asserts what does not depend on the clock: every honest operation
// succeeded, every acknowledged event is served at the end, the node
// never exited, and each attacker got no more than its bound. Latency is
// reported, never asserted.
const (
	hostileShort      = 3 * time.Second
	hostileFull       = 30 * time.Second
	hostileSeedShort  = 5000
	hostileSeedFull   = 20000
	hostileOpTimeout  = 10 * time.Second
	hostileHonestRest = 200 * time.Millisecond
)

// hostileEnv is what the honest clients and the attacks share.
type hostileEnv struct {
	t      *testing.T
	n      *node
	mesh   string // the node's mesh multiaddr with /p2p/
	leaf   string // a DIDComm recipient the node mediates for
	node   string // the node's DID
	sender *didcomm.Packer
	seed   int

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

// attack runs until ctx ends and says what the attacker got; a non-empty
// violation names a bound it got past.
type attack struct {
	name string
	run  func(ctx context.Context, env *hostileEnv) (got, violation string)
}

func TestHostileLoad(t *testing.T) {
	dur, seed := hostileShort, hostileSeedShort
	if os.Getenv("FLEETMESH_HOSTILE_FULL") != "" {
		dur, seed = hostileFull, hostileSeedFull
	}
	env := startHostileNode(t)
	env.seed = seed
	env.seedStore(seed)
	env.setupMediation()

	attacks := []attack{
		{"none (baseline)", func(ctx context.Context, _ *hostileEnv) (string, string) { <-ctx.Done(); return "", "" }},
		{"connection flood", attackConnFlood},
		{"slowloris", attackSlowloris},
		{"subscription flood", attackSubFlood},
		{"broad-filter REQ loop", attackReqLoop},
		{"NEG-OPEN loop over the store", attackNegLoop},
		{"oversized and malformed frames", attackFrames},
		{"DIDComm POST flood, one recipient", attackDIDComm},
		{"mesh peer: streams without end", attackStreams},
		{"mesh peer: PEX descriptors without end", attackPEX},
		{"mesh peer: gossip of invalid events", attackGossip},
	}
	var rows []*phase
	for _, a := range attacks {
		rows = append(rows, env.runPhase(a, dur))
		select {
		case <-env.n.exited:
			t.Fatalf("the node exited during %q: %v\n%s", a.name, env.n.err, tail(env.n.output(), 4000))
		default:
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n| attack | what the attacker got | honest success | honest p50 | honest p99 | baseline p99 | ratio | node RSS | node fds |\n|---|---|---|---|---|---|---|---|---|\n")
	base := rows[0].p99()
	for _, r := range rows {
		ratio := "-"
		if base > 0 {
			ratio = fmt.Sprintf("%.2fx", float64(r.p99())/float64(base))
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f%% (%d ops) | %v | %v | %v | %s | %d MiB | %d |\n",
			r.name, r.got, r.success(), r.ops, r.quantile(50).Round(100*time.Microsecond), r.p99().Round(100*time.Microsecond), base.Round(100*time.Microsecond), ratio, r.rssKB/1024, r.fds)
	}
	t.Logf("each phase %v, %d events in the store at the start%s", dur, seed, b.String())

	for _, r := range rows {
		if r.fails > 0 {
			t.Errorf("%s: %d of %d honest operations failed (first: %s)", r.name, r.fails, r.ops, r.failMsg)
		}
	}
	env.checkAcked()
	if out := env.n.output(); strings.Contains(out, "too many open files") {
		t.Errorf("the node ran out of file descriptors:\n%s", tail(out, 4000))
	}
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
	home := newHome(t, nodeConfig(nil))
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

// seedStore publishes n events from 127.0.0.9, pipelined, so that broad
// filters and NEG-OPEN have a store to scan.
func (env *hostileEnv) seedStore(n int) {
	t := env.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _, err := dialFrom(ctx, env.n.url, "127.0.0.9")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u, _ := newUser()
	go func() {
		// Owned by seedStore: ends when c closes.
		for i := 0; i < n; i++ {
			e, _ := u.signAt(time.Now().Unix()-int64(n-i), 1, fmt.Sprint("seed ", i), nil)
			msg, _ := json.Marshal([]any{"EVENT", e})
			if c.WriteMessage(websocket.TextMessage, msg) != nil {
				return
			}
		}
	}()
	for oks := 0; oks < n; {
		c.SetReadDeadline(time.Now().Add(hostileOpTimeout))
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("seeding: %v after %d OKs", err, oks)
		}
		if m, ok := parseOK(data); ok {
			if !m.Accepted {
				t.Fatalf("seed event refused: %s", m.Message)
			}
			oks++
		}
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
	seen, err := mediator.OpenSeen(t.TempDir(), mediator.DefaultMaxSeen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seen.Close() })
	hc := clientFromIP("127.0.0.7")
	defer hc.CloseIdleConnections()
	url := env.n.httpURL() + "/didcomm"
	ex := func(ctx context.Context, packed []byte) ([]byte, error) {
		out, err := transport.PostHTTP(ctx, hc, url, packed)
		if err != nil && out != nil {
			return out, nil
		}
		return out, err
	}
	client := &mediator.Client{Packer: lp, Unpacker: lu, Mediator: env.node, Exchange: ex, Seen: seen}
	ctx := context.Background()
	if _, err := client.RequestMediation(ctx); err != nil {
		t.Fatalf("mediation: %v", err)
	}
	if _, err := client.UpdateRecipients(ctx, mediator.Update{RecipientDID: leafKey.DID(), Action: "add"}); err != nil {
		t.Fatalf("recipient update: %v", err)
	}
	env.leaf = leafKey.DID()
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

// runPhase runs the honest clients and one attack for dur.
func (env *hostileEnv) runPhase(a attack, dur time.Duration) *phase {
	p := &phase{name: a.name}
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
	wg.Go(func() {
		for ctx.Err() == nil {
			if rss, fds := procStats(env.n.cmd.Process.Pid); rss > 0 {
				mu.Lock()
				p.rssKB, p.fds = max(p.rssKB, rss), max(p.fds, fds)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	got, violation := a.run(ctx, env)
	wg.Wait()
	p.got = got
	if violation != "" {
		env.t.Errorf("%s: %s", a.name, violation)
	}
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

// workers runs f in n goroutines until ctx ends.
func workers(ctx context.Context, n int, f func(ctx context.Context, w int)) {
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Go(func() { f(ctx, w) })
	}
	wg.Wait()
}

func attackConnFlood(ctx context.Context, env *hostileEnv) (string, string) {
	var mu sync.Mutex
	var held []*websocket.Conn
	refused := map[int]int{}
	var silent atomic.Int64
	var tried atomic.Int64
	workers(ctx, floodWorkers, func(ctx context.Context, _ int) {
		for tried.Add(1) <= floodConns && ctx.Err() == nil {
			c, res, err := dialFrom(ctx, env.n.url, "127.0.0.1")
			mu.Lock()
			switch {
			case err == nil:
				held = append(held, c)
			case res != nil:
				refused[res.StatusCode]++
			default:
				silent.Add(1)
			}
			mu.Unlock()
		}
		<-ctx.Done()
	})
	for _, c := range held {
		c.Close()
	}
	got := fmt.Sprintf("%d of %d connections (429: %d, 503: %d, closed unanswered: %d)", len(held), min(tried.Load(), floodConns), refused[429], refused[503], silent.Load())
	if len(held) > 64 {
		return got, fmt.Sprintf("%d WebSocket connections from one address, over the default cap of 64", len(held))
	}
	return got, ""
}

func attackSlowloris(ctx context.Context, env *hostileEnv) (string, string) {
	addr := strings.TrimPrefix(env.n.url, "ws://")
	var mu sync.Mutex
	var conns []net.Conn
	var tried atomic.Int64
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	workers(ctx, 32, func(ctx context.Context, _ int) {
		var mine []net.Conn
		for tried.Add(1) <= 1000 && ctx.Err() == nil {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				continue
			}
			c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"))
			mine = append(mine, c)
		}
		mu.Lock()
		conns = append(conns, mine...)
		mu.Unlock()
		// Trickle a header line a second on each held connection, never
		// ending the request.
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			for _, c := range mine {
				c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				c.Write([]byte("X-Slow: 1\r\n"))
			}
		}
	})
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
		}
		c.Close()
	}
	got := fmt.Sprintf("%d of %d half-open handshakes still held at the end", open, len(conns))
	if open > 64+8 {
		return got, fmt.Sprintf("%d half-open connections from one address, over the accept cap of 72", open)
	}
	return got, ""
}

// wsFrom dials from 127.0.0.1 and drains what the relay sends in a
// goroutine that ends with the connection.
func wsFrom(ctx context.Context, env *hostileEnv, onMsg func([]byte)) *websocket.Conn {
	c, _, err := dialFrom(ctx, env.n.url, "127.0.0.1")
	if err != nil {
		return nil
	}
	go func() {
		// Owned by the connection: ends when it closes.
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if onMsg != nil {
				onMsg(data)
			}
		}
	}()
	return c
}

func attackSubFlood(ctx context.Context, env *hostileEnv) (string, string) {
	var subs, closed atomic.Int64
	workers(ctx, 64, func(ctx context.Context, w int) {
		c := wsFrom(ctx, env, func(data []byte) {
			if bytes.HasPrefix(data, []byte(`["CLOSED"`)) {
				closed.Add(1)
			}
		})
		if c == nil {
			return
		}
		defer c.Close()
		for i := 0; i < 250 && ctx.Err() == nil; i++ {
			if c.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`["REQ","s%d",{"kinds":[1],"limit":0}]`, i))) != nil {
				return
			}
			subs.Add(1)
		}
		<-ctx.Done()
	})
	return fmt.Sprintf("%d REQs sent on 64 connections, %d refused with CLOSED", subs.Load(), closed.Load()), ""
}

func attackReqLoop(ctx context.Context, env *hostileEnv) (string, string) {
	var answered, refused atomic.Int64
	workers(ctx, 8, func(ctx context.Context, w int) {
		c, _, err := dialFrom(ctx, env.n.url, "127.0.0.1")
		if err != nil {
			return
		}
		defer c.Close()
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
		for i := 0; ctx.Err() == nil; i++ {
			_, err := storedEvents(c, fmt.Sprint("b", i), map[string]any{"limit": 500})
			switch {
			case err == nil:
				answered.Add(1)
			case strings.Contains(err.Error(), "rate-limited"):
				refused.Add(1)
			default:
				return
			}
		}
	})
	return fmt.Sprintf("%d broad REQs answered, %d refused rate-limited", answered.Load(), refused.Load()), ""
}

func attackNegLoop(ctx context.Context, env *hostileEnv) (string, string) {
	var opened, refused atomic.Int64
	workers(ctx, 8, func(ctx context.Context, w int) {
		c, _, err := dialFrom(ctx, env.n.url, "127.0.0.1")
		if err != nil {
			return
		}
		defer c.Close()
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprint("n", i)
			if c.WriteMessage(websocket.TextMessage, []byte(`["NEG-OPEN","`+id+`",{},"61"]`)) != nil {
				return
			}
			for {
				_, data, err := c.ReadMessage()
				if err != nil {
					return
				}
				if bytes.HasPrefix(data, []byte(`["NEG-MSG","`+id+`"`)) {
					opened.Add(1)
					break
				}
				if bytes.HasPrefix(data, []byte(`["NEG-ERR","`+id+`"`)) {
					refused.Add(1)
					break
				}
			}
			c.WriteMessage(websocket.TextMessage, []byte(`["NEG-CLOSE","`+id+`"]`))
		}
	})
	return fmt.Sprintf("%d sessions over all %d+ events opened, %d refused", opened.Load(), env.seed, refused.Load()), ""
}

func attackFrames(ctx context.Context, env *hostileEnv) (string, string) {
	big := `["EVENT",{"content":"` + strings.Repeat("x", 200<<10) + `"}]`
	frames := []string{big, `[[[[`, `["EVENT",{"id":"zz"}]`, `["REQ"]`, "\x00\xff", `{"not":"an array"}`}
	var sent, reconnects atomic.Int64
	workers(ctx, 8, func(ctx context.Context, w int) {
		for ctx.Err() == nil {
			c := wsFrom(ctx, env, nil)
			if c == nil {
				return
			}
			reconnects.Add(1)
			for i := 0; ctx.Err() == nil; i++ {
				if c.WriteMessage(websocket.TextMessage, []byte(frames[i%len(frames)])) != nil {
					break
				}
				sent.Add(1)
			}
			c.Close()
		}
	})
	return fmt.Sprintf("%d bad frames sent on %d connections; each answered with NOTICE or refused", sent.Load(), reconnects.Load()), ""
}

func attackDIDComm(ctx context.Context, env *hostileEnv) (string, string) {
	url := env.n.httpURL() + "/didcomm"
	var mu sync.Mutex
	status := map[int]int{}
	hc := clientFromIP("127.0.0.1")
	defer hc.CloseIdleConnections()
	fwds := make([][]byte, 64)
	for i := range fwds {
		fwds[i] = env.forward(1000 + i)
	}
	start := time.Now()
	workers(ctx, 16, func(ctx context.Context, w int) {
		for i := 0; ctx.Err() == nil; i++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(fwds[(w*7+i)%len(fwds)]))
			req.Header.Set("Content-Type", didcomm.MediaTypeEncrypted)
			res, err := hc.Do(req)
			if err != nil {
				continue
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			mu.Lock()
			status[res.StatusCode]++
			mu.Unlock()
		}
	})
	secs := time.Since(start).Seconds()
	got := fmt.Sprintf("%d forwards queued for one recipient; 429: %d, 503: %d, other: %d", status[202], status[429], status[503], status[400])
	// The per-(address, recipient) bucket: a burst of 20 and 2 a second.
	if bound := 20 + int(2*secs) + 2; status[202] > bound {
		return got, fmt.Sprintf("%d forwards from one address queued for one recipient, over the bound of %d", status[202], bound)
	}
	return got, ""
}

// attackerHost is a libp2p host on loopback, connected to the node.
func attackerHost(ctx context.Context, env *hostileEnv) (host.Host, peer.ID, error) {
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		return nil, "", err
	}
	ai, err := peer.AddrInfoFromP2pAddr(multiaddr.StringCast(env.mesh))
	if err != nil {
		h.Close()
		return nil, "", err
	}
	if err := h.Connect(ctx, *ai); err != nil {
		h.Close()
		return nil, "", err
	}
	return h, ai.ID, nil
}

// banned reports the node's misbehaviour counters.
func (env *hostileEnv) banned() string {
	b, _ := env.metric("fleetmesh_mesh_peers_banned_total")
	return fmt.Sprintf("peers banned so far: %g", b)
}

func attackStreams(ctx context.Context, env *hostileEnv) (string, string) {
	h, id, err := attackerHost(ctx, env)
	if err != nil {
		return "could not connect: " + err.Error(), ""
	}
	defer h.Close()
	var opened, failed atomic.Int64
	workers(ctx, 8, func(ctx context.Context, _ int) {
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			s, err := h.NewStream(sctx, id, protocol.ID("/fleetmesh/sync/1.0.0"))
			cancel()
			if err != nil {
				failed.Add(1)
				if h.Network().Connectedness(id) != network.Connected {
					cctx, cancel := context.WithTimeout(ctx, time.Second)
					h.Connect(cctx, peer.AddrInfo{ID: id, Addrs: h.Peerstore().Addrs(id)})
					cancel()
				}
				continue
			}
			opened.Add(1)
			_ = s // held open, never written
		}
	})
	return fmt.Sprintf("%d sync streams opened (then held or reset by the node), %d refused; %s", opened.Load(), failed.Load(), env.banned()), ""
}

func attackPEX(ctx context.Context, env *hostileEnv) (string, string) {
	h, id, err := attackerHost(ctx, env)
	if err != nil {
		return "could not connect: " + err.Error(), ""
	}
	defer h.Close()
	// A peer-exchange message with 32 descriptors of random bytes, no
	// offers, no wants (spec/mesh-discovery.md's wire form).
	var msg []byte
	msg = varint.ToUvarint(32)
	for i := 0; i < 32; i++ {
		d := bytes.Repeat([]byte{byte(i)}, 300)
		msg = append(msg, varint.ToUvarint(uint64(len(d)))...)
		msg = append(msg, d...)
	}
	msg = append(msg, 0, 0)
	var sent, refused atomic.Int64
	workers(ctx, 4, func(ctx context.Context, _ int) {
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			s, err := h.NewStream(sctx, id, peerexchange.Protocol)
			cancel()
			if err != nil {
				refused.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			s.Write(msg)
			sent.Add(1)
			s.Close()
		}
	})
	return fmt.Sprintf("%d exchanges of 32 junk descriptors sent, %d streams refused; %s", sent.Load(), refused.Load(), env.banned()), ""
}

func attackGossip(ctx context.Context, env *hostileEnv) (string, string) {
	h, _, err := attackerHost(ctx, env)
	if err != nil {
		return "could not connect: " + err.Error(), ""
	}
	defer h.Close()
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign), pubsub.WithNoAuthor())
	if err != nil {
		return "gossipsub: " + err.Error(), ""
	}
	k, _ := nostr.GenerateSecretKey()
	ev := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: 1, Tags: nostr.Tags{}, Content: "spam"}
	k.Sign(ev)
	topic, err := ps.Join(mesh.Topic(mesh.ShardOf(ev.PubKey)))
	if err != nil {
		return "join: " + err.Error(), ""
	}
	// Wait (bounded) until the node is a peer of the topic.
	for i := 0; i < 100 && len(topic.ListPeers()) == 0 && ctx.Err() == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	var sent atomic.Int64
	for i := 0; ctx.Err() == nil; i++ {
		ev.Content = fmt.Sprint("spam ", i)
		k.Sign(ev)
		ev.Sig[0] ^= 0xff // a bad signature: the costly check fails
		if topic.Publish(ctx, ev.AppendJSON(nil)) != nil {
			break
		}
		sent.Add(1)
	}
	bad, _ := env.metric(`fleetmesh_mesh_misbehavior_total{reason="invalid_gossip"}`)
	return fmt.Sprintf("%d invalid events published, %g penalised; %s", sent.Load(), bad, env.banned()), ""
}
