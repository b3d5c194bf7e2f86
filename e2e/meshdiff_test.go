//go:build linux

package e2e

import (
	"context"
	bin "encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/gorilla/websocket"
)

// The differential test's knobs. A run is fixed by its seed: the seed
// picks every operation, node, key, kind, tag and target, so a failing
// seed replays the same run (the timing of the processes, and so the ids
// and created_at of the events, differ from run to run).
var (
	diffSeed = flag.Uint64("seed", 0, "TestMeshAgreesWithOneRelay: the run's seed (0: a random one, or $"+diffSeedEnv+")")
	diffLong = flag.Bool("long", false, "TestMeshAgreesWithOneRelay: the long run (5 nodes, "+strconv.Itoa(diffLongOps)+" operations) whose figures go in docs/benchmarks/mesh.md")
)

const (
	// diffSeedEnv sets the seed when -seed is not given.
	diffSeedEnv = "FLEETMESH_E2E_DIFF_SEED"
	// diffShortOps and diffLongOps are the operations of the CI run and
	// of the long run.
	diffShortOps = 200
	diffLongOps  = 1000
	// convergeBound is the stated bound on convergence the test holds
	// the mesh to: once writes stop, every node serves what one relay
	// would within it (the mesh syncs every 2 s here, and a healed
	// partition or a restarted node catches up by sync). It is generous
	// because the machine running CI is shared.
	convergeBound = 60 * time.Second
	// diffOpTimeout bounds one client operation (dial, EVENT and OK, or
	// REQ to EOSE).
	diffOpTimeout = 20 * time.Second
	// diffMaxViolations stops a run once this many violations are found.
	diffMaxViolations = 40
	// liveGrace bounds the wait, once the mesh has converged, for live
	// subscriptions to have received what the nodes now hold (delivery
	// runs off the write path).
	liveGrace = 15 * time.Second
	// diffMaxSubs is how many live subscriptions are open at once.
	diffMaxSubs = 3
	// diffLabNet is the lab LAN the nodes share (RFC 1918, inside the
	// lab's namespaces only); node i is diffLabNet+(10+i).
	diffLabNet = "10.79.0."
)

// diffPlan is the shape of a run.
type diffPlan struct {
	nodes, ops int
	// checkpointEvery is how many operations run between convergence
	// checks (one also ends the run).
	checkpointEvery int
	// restarts and partitions are how many of each the run makes, each
	// at an operation the seed picks, lasting downOps / partitionOps
	// operations.
	restarts, partitions  int
	downOps, partitionOps int
}

var (
	diffShort = diffPlan{nodes: 3, ops: diffShortOps, checkpointEvery: 50, restarts: 2, partitions: 1, downOps: 6, partitionOps: 15}
	diffFull  = diffPlan{nodes: 5, ops: diffLongOps, checkpointEvery: 100, restarts: 5, partitions: 3, downOps: 10, partitionOps: 25}
)

// diffNodeConfig is a lab node's config: home class, no mDNS, TCP on a
// fixed port of its own namespace's address, syncs every 2 s.
const diffNodeConfig = `class = "home"

[relay]
events_per_second = 0
ip_events_per_second = 0

[store]
dir = "data"

[mesh]
mdns = 'off'
listen = ["/ip4/0.0.0.0/tcp/4001"]
sync_interval = "2s"
maintain_interval = "1s"
`

// TestMeshAgreesWithOneRelay is the differential test of the whole mesh
// against one relay (issue 30), in the manner of Pebble's metamorphic test
// and Jepsen's checkers: a seeded generator sends random operations
// (publish; replace kinds 0, 3 and 10002, newer, older or tied; addressable
// kind 30023 with d tags; delete by id and by "a" address with kind 5;
// notes expiring after a few seconds (NIP-40); REQs by id, author, kind,
// tag and time window; live subscriptions) to random nodes of a mesh of
// real `fleetmesh run` processes, each in a network namespace of a lab
// LAN, joined with --bootstrap, mDNS off. Nodes are restarted (SIGTERM or
// kill -9) and one is cut off the LAN (iptables DROP, silent) and healed
// mid-run. A reference model of one relay (relaymodel_test.go) checks:
//
//   - at the node that acknowledged a write, every later read agrees with
//     the model at once (read your writes, including replacements and
//     deletions);
//   - no read anywhere serves an event that is deleted, superseded or
//     expired once the answering node has seen what deletes or supersedes
//     it, nor an event no node acknowledged; and a node refuses no write
//     one relay would take, and takes none it holds the killer of;
//   - at checkpoints, with writes stopped, every node serves exactly what
//     the model does within convergeBound, and every live subscription
//     has received every live matching event written after it opened.
//
// The CI run is short (3 nodes, 200 operations); -long runs 5 nodes and
// 1,000 operations and logs the figures for docs/benchmarks/mesh.md. A
// failing run prints its seed: -seed N (or FLEETMESH_E2E_DIFF_SEED=N)
// replays it.
func TestMeshAgreesWithOneRelay(t *testing.T) {
	needBinary(t)
	plan := diffShort
	if *diffLong {
		plan = diffFull
	}
	seed := *diffSeed
	if seed == 0 {
		if v := os.Getenv(diffSeedEnv); v != "" {
			s, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s=%q: want a whole number", diffSeedEnv, v)
			}
			seed = s
		}
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay: go test ./e2e -run TestMeshAgreesWithOneRelay -seed %d%s)", seed, seed, map[bool]string{true: " -long"}[*diffLong])
	d := newDiffRun(t, seed, plan)
	defer func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: replay with -seed %d%s\nfailed checks: %s\nlast operations:\n%s", seed, seed,
				map[bool]string{true: " -long"}[*diffLong], d.failedChecks(), d.opTail(40))
		}
	}()
	d.run()
}

// diffNode is one node of the lab mesh.
type diffNode struct {
	i      int
	ns     string
	home   string
	peerID string
	proc   *node // nil while down
	cut    bool  // cut off the LAN
	// seen is what the node has seen, with when: acknowledged, served,
	// delivered live, or converged past. must is what it is bound to
	// serve while live: acknowledged or converged past.
	seen map[string]time.Time
	must map[string]bool
	// restarts counts starts after the first, to tell subscriptions
	// broken by one.
	restarts int
}

// addr is the node's mesh multiaddr.
func (n *diffNode) addr() string {
	return fmt.Sprintf("/ip4/%s%d/tcp/4001/p2p/%s", diffLabNet, 10+n.i, n.peerID)
}

// diffRun is one run of the differential test.
type diffRun struct {
	t     *testing.T
	seed  uint64
	r     *rand.Rand
	plan  diffPlan
	lab   *netLab
	nodes []*diffNode
	users []*user
	model *relayModel
	// base is the created_at of operation 0: event times are base+seq,
	// so that replacements older than, tied with and newer than a version
	// follow from the seed.
	base int64
	// written is every write the generator made, acknowledged or not, in
	// order; the targets of deletions and replacements are picked from
	// it by index, so that the seed alone decides them.
	written []*event
	ops     []string
	// started is when each operation began.
	started map[int]time.Time
	subs    []*diffSub

	violations []string
	reported   map[string]bool
	checks     int
	opCount    map[string]int
	converge   []time.Duration
	// latency is the REQ round trips (dial to EOSE) of the random reads,
	// with the mesh whole (true) and with a node cut off or down.
	latency map[bool][]time.Duration
}

func newDiffRun(t *testing.T, seed uint64, plan diffPlan) *diffRun {
	d := &diffRun{
		t: t, seed: seed, plan: plan,
		r:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		model:    newRelayModel(),
		opCount:  map[string]int{},
		started:  map[int]time.Time{},
		reported: map[string]bool{},
		latency:  map[bool][]time.Duration{},
		base:     time.Now().Unix() - 3*int64(plan.ops) - 60,
	}
	for range 3 {
		var k [32]byte
		bin.LittleEndian.PutUint64(k[:], d.r.Uint64())
		bin.LittleEndian.PutUint64(k[8:], d.r.Uint64())
		bin.LittleEndian.PutUint64(k[16:], d.r.Uint64())
		k[31] = 1
		priv, _ := btcec.PrivKeyFromBytes(k[:])
		d.users = append(d.users, &user{priv: priv, pubHex: fmt.Sprintf("%x", schnorr.SerializePubKey(priv.PubKey()))})
	}
	d.lab = newNetLab(t)
	lan := d.lab.addNS("lan")
	plug := d.lab.bridge(lan, "br0")
	for i := range plan.nodes {
		ns := d.lab.addNS(fmt.Sprintf("n%d", i))
		port := fmt.Sprintf("p-n%d", i)
		d.lab.veth(lan, port, ns, "eth0")
		plug(port)
		d.lab.addr(ns, "eth0", fmt.Sprintf("%s%d/24", diffLabNet, 10+i))
		home := newHome(t, diffNodeConfig)
		d.nodes = append(d.nodes, &diffNode{i: i, ns: ns, home: home, peerID: runID(t, home).PeerID, seen: map[string]time.Time{}, must: map[string]bool{}})
	}
	for _, n := range d.nodes {
		d.start(n)
	}
	return d
}

// start runs the node's process in its namespace, bootstrapped with
// every other node.
func (d *diffRun) start(n *diffNode) {
	d.t.Helper()
	args := []string{"netns", "exec", n.ns, binary, "run", "--home", n.home, "--listen", labRelayListen}
	for _, o := range d.nodes {
		if o != n {
			args = append(args, "--bootstrap", o.addr())
		}
	}
	p, err := startNodeCmd(d.t, n.home, exec.Command("ip", args...))
	if err != nil {
		d.t.Fatal(err)
	}
	n.proc = p
}

// up lists the nodes that are running.
func (d *diffRun) up() []*diffNode {
	var out []*diffNode
	for _, n := range d.nodes {
		if n.proc != nil {
			out = append(out, n)
		}
	}
	return out
}

// logOp records an operation for the failure report.
func (d *diffRun) logOp(seq int, format string, args ...any) {
	d.ops = append(d.ops, fmt.Sprintf("op %d: ", seq)+fmt.Sprintf(format, args...))
}

func (d *diffRun) opTail(n int) string {
	return strings.Join(d.ops[max(0, len(d.ops)-n):], "\n")
}

// violate records a violation, once per node however often a read
// repeats it; the run stops after diffMaxViolations.
func (d *diffRun) violate(seq int, n *diffNode, what string) {
	key := fmt.Sprint(n.i, strings.TrimPrefix(what, "while converging: "))
	if d.reported[key] {
		return
	}
	d.reported[key] = true
	d.violations = append(d.violations, what)
	d.t.Errorf("op %d, node %d: %s", seq, n.i, what)
}

// failedChecks counts the violations by check name.
func (d *diffRun) failedChecks() string {
	count := map[string]int{}
	for _, v := range d.violations {
		name, _, _ := strings.Cut(strings.TrimPrefix(v, "while converging: "), ":")
		count[name]++
	}
	var out []string
	for k, v := range count {
		out = append(out, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// schedule is when the run's restarts and partitions start, by operation.
type schedule struct {
	restartAt   map[int]int // op → node
	restoreAt   map[int]int
	cutAt       map[int]int
	healAt      map[int]int
	checkpoints map[int]bool
}

// schedule picks the run's restarts and partitions from the seed: each in
// its own window, never two at once, and checkpoints every
// checkpointEvery operations outside them and at the end.
func (d *diffRun) schedule() schedule {
	s := schedule{restartAt: map[int]int{}, restoreAt: map[int]int{}, cutAt: map[int]int{}, healAt: map[int]int{}, checkpoints: map[int]bool{}}
	events := d.plan.restarts + d.plan.partitions
	window := d.plan.ops / (events + 1)
	kinds := make([]bool, events) // true: a partition
	for i := range d.plan.partitions {
		kinds[i] = true
	}
	d.r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	busy := map[int]bool{}
	for i, cut := range kinds {
		lasting := d.plan.downOps
		if cut {
			lasting = d.plan.partitionOps
		}
		start := window*(i+1) - lasting/2 + d.r.IntN(max(1, window-lasting)) - (window-lasting)/2
		start = max(1, min(start, d.plan.ops-lasting-2))
		node := d.r.IntN(d.plan.nodes)
		if cut {
			s.cutAt[start], s.healAt[start+lasting] = node, node
		} else {
			s.restartAt[start], s.restoreAt[start+lasting] = node, node
		}
		for op := start; op <= start+lasting; op++ {
			busy[op] = true
		}
	}
	for op := d.plan.checkpointEvery; op < d.plan.ops; op += d.plan.checkpointEvery {
		for busy[op] && op < d.plan.ops {
			op++
		}
		if op < d.plan.ops {
			s.checkpoints[op] = true
		}
	}
	s.checkpoints[d.plan.ops] = true
	return s
}

func (d *diffRun) run() {
	s := d.schedule()
	start := time.Now()
	for seq := 0; seq <= d.plan.ops; seq++ {
		if node, ok := s.restartAt[seq]; ok {
			d.stopNode(seq, d.nodes[node])
		}
		if node, ok := s.restoreAt[seq]; ok {
			d.restartNode(seq, d.nodes[node])
		}
		if node, ok := s.cutAt[seq]; ok {
			d.cut(seq, d.nodes[node], true)
		}
		if node, ok := s.healAt[seq]; ok {
			d.cut(seq, d.nodes[node], false)
		}
		if s.checkpoints[seq] {
			d.checkpoint(seq)
		}
		if seq < d.plan.ops {
			d.step(seq)
		}
		if len(d.violations) >= diffMaxViolations {
			d.t.Fatalf("stopped after %d violations", len(d.violations))
		}
	}
	d.report(time.Since(start))
}

// report logs the run's figures: operations by type, checks, and
// convergence time p50/p99.
func (d *diffRun) report(took time.Duration) {
	var names []string
	total := 0
	for k, v := range d.opCount {
		names = append(names, fmt.Sprintf("%s %d", k, v))
		total += v
	}
	sort.Strings(names)
	d.t.Logf("seed %d: %d nodes, %d operations (%s), %d checks, %d violations, convergence %s; REQ round trip with the mesh whole %s, with a node cut off or down %s; in %s",
		d.seed, d.plan.nodes, total, strings.Join(names, ", "), d.checks, len(d.violations),
		quantiles(d.converge), quantiles(d.latency[true]), quantiles(d.latency[false]), took.Round(time.Second))
}

// quantiles describes a sample: its size, p50, p99 and maximum.
func quantiles(sample []time.Duration) string {
	if len(sample) == 0 {
		return "no samples"
	}
	s := slices.Clone(sample)
	slices.Sort(s)
	q := func(p int) time.Duration { return s[min(len(s)-1, (len(s)*p+99)/100-1)].Round(time.Millisecond) }
	return fmt.Sprintf("%d samples p50 %s p99 %s max %s", len(s), q(50), q(99), q(100))
}

// stopNode takes a node down, SIGTERM or kill -9 as the seed says; its
// live subscriptions end with it.
func (d *diffRun) stopNode(seq int, n *diffNode) {
	hard := d.r.IntN(2) == 0
	d.logOp(seq, "stop node %d (kill -9: %v)", n.i, hard)
	d.opCount["restart"]++
	if hard {
		n.proc.kill()
	} else if err := n.proc.stop(); err != nil {
		d.t.Fatalf("stop node %d: %v\n%s", n.i, err, tail(n.proc.output(), 4000))
	}
	n.proc = nil
	n.restarts++
}

func (d *diffRun) restartNode(seq int, n *diffNode) {
	d.logOp(seq, "start node %d again", n.i)
	d.start(n)
}

// cut cuts a node off the lab LAN (or heals it): iptables DROP in its
// namespace, silent as a failed link, so its connections stall rather
// than close. Its clients still reach it: they connect inside its
// namespace.
func (d *diffRun) cut(seq int, n *diffNode, cut bool) {
	op := "-I"
	if !cut {
		op = "-D"
	}
	d.logOp(seq, "partition node %d: %v", n.i, cut)
	if cut {
		d.opCount["partition"]++
	}
	for _, rule := range [][]string{{"INPUT", "-i", "eth0", "-j", "DROP"}, {"OUTPUT", "-o", "eth0", "-j", "DROP"}} {
		d.lab.must("ip", append([]string{"netns", "exec", n.ns, d.lab.iptables, op}, rule...)...)
	}
	n.cut = cut
}

// step runs one random operation at a random running node.
func (d *diffRun) step(seq int) {
	d.started[seq] = time.Now()
	up := d.up()
	n := up[d.r.IntN(len(up))]
	u := d.users[d.r.IntN(len(d.users))]
	switch w := d.r.IntN(100); {
	case w < 22:
		d.publishNote(seq, n, u)
	case w < 34:
		d.replace(seq, n, u)
	case w < 44:
		d.addressable(seq, n, u)
	case w < 52:
		d.deleteByID(seq, n, u)
	case w < 57:
		d.deleteByAddress(seq, n, u)
	case w < 94:
		d.read(seq, n, d.randomFilter(seq, u))
	default:
		d.subscribe(seq, n, u)
	}
}

// tagPool and dPool are the values the generator draws tags from, so
// that filters by tag have several matches.
var (
	tagPool = []string{"alpha", "beta", "gamma"}
	dPool   = []string{"one", "two", "three"}
)

func (d *diffRun) publishNote(seq int, n *diffNode, u *user) {
	tags := [][]string{{"t", tagPool[d.r.IntN(len(tagPool))]}}
	what := "note"
	if d.r.IntN(5) == 0 {
		// Expiring 3 to 8 s after now: inside the run, so later reads
		// meet it both live and expired.
		tags = append(tags, []string{"expiration", strconv.FormatInt(time.Now().Unix()+3+int64(d.r.IntN(6)), 10)})
		what = "expiring note"
	}
	ev := d.write(seq, n, u, d.base+int64(seq), 1, what, tags)
	d.readBack(seq, n, &modelFilter{IDs: []string{ev.ID}})
}

// versionTime picks a replacement's created_at against the last version
// the generator wrote for the address: newer mostly, sometimes older or
// tied (a tie goes to the lower id).
func (d *diffRun) versionTime(seq int, match func(e *event) bool) (int64, string) {
	var last *event
	for i := len(d.written) - 1; i >= 0; i-- {
		if match(d.written[i]) {
			last = d.written[i]
			break
		}
	}
	switch w := d.r.IntN(10); {
	case last != nil && w == 0:
		return last.CreatedAt - 1, "older"
	case last != nil && w == 1:
		return last.CreatedAt, "tied"
	}
	return d.base + int64(seq), "newer"
}

func (d *diffRun) replace(seq int, n *diffNode, u *user) {
	kind := []int{0, 3, 10002}[d.r.IntN(3)]
	at, how := d.versionTime(seq, func(e *event) bool { return e.PubKey == u.pubHex && e.Kind == kind })
	d.write(seq, n, u, at, kind, fmt.Sprintf("replace kind %d (%s)", kind, how), [][]string{{"t", tagPool[d.r.IntN(len(tagPool))]}})
	d.readBack(seq, n, &modelFilter{Authors: []string{u.pubHex}, Kinds: []int{kind}})
}

func (d *diffRun) addressable(seq int, n *diffNode, u *user) {
	dv := dPool[d.r.IntN(len(dPool))]
	at, how := d.versionTime(seq, func(e *event) bool { return e.PubKey == u.pubHex && e.Kind == 30023 && tagValue(e, "d") == dv })
	d.write(seq, n, u, at, 30023, fmt.Sprintf("addressable d=%s (%s)", dv, how), [][]string{{"d", dv}})
	d.readBack(seq, n, &modelFilter{Authors: []string{u.pubHex}, Kinds: []int{30023}, D: []string{dv}})
}

// deleteByID deletes (kind 5, "e") one of the author's notes written so
// far, picked by index.
func (d *diffRun) deleteByID(seq int, n *diffNode, u *user) {
	var notes []*event
	for _, e := range d.written {
		if e.PubKey == u.pubHex && e.Kind == 1 {
			notes = append(notes, e)
		}
	}
	if len(notes) == 0 {
		d.publishNote(seq, n, u)
		return
	}
	target := notes[d.r.IntN(len(notes))]
	d.write(seq, n, u, d.base+int64(seq), 5, "delete by id "+target.ID[:8], [][]string{{"e", target.ID}})
	d.readBack(seq, n, &modelFilter{IDs: []string{target.ID}})
}

// deleteByAddress deletes (kind 5, "a") an address of the author:
// kind 30023 with a d from the pool, or kind 10002.
func (d *diffRun) deleteByAddress(seq int, n *diffNode, u *user) {
	a := fmt.Sprintf("10002:%s:", u.pubHex)
	back := &modelFilter{Authors: []string{u.pubHex}, Kinds: []int{10002}}
	if d.r.IntN(3) != 0 {
		dv := dPool[d.r.IntN(len(dPool))]
		a = fmt.Sprintf("30023:%s:%s", u.pubHex, dv)
		back = &modelFilter{Authors: []string{u.pubHex}, Kinds: []int{30023}, D: []string{dv}}
	}
	d.write(seq, n, u, d.base+int64(seq), 5, "delete address "+a[:6]+"…"+a[strings.LastIndex(a, ":"):], [][]string{{"a", a}})
	d.readBack(seq, n, back)
}

// readBack, on half of the writes as the seed says, reads at once at
// the node that took the write what the write changed: the note, the
// address, the deleted event (issue 30's read-after-write cases).
func (d *diffRun) readBack(seq int, n *diffNode, f *modelFilter) {
	if d.r.IntN(2) == 0 {
		d.read(seq, n, f)
	}
}

// write signs and publishes one event at n and checks the OK against
// what n has seen: a node must take what one relay would take, and
// refuse a version or a deleted event it holds the killer of.
func (d *diffRun) write(seq int, n *diffNode, u *user, createdAt int64, kind int, what string, tags [][]string) *event {
	ev, err := u.signAt(createdAt, kind, fmt.Sprintf("op %d seed %d", seq, d.seed), tags)
	if err != nil {
		d.t.Fatal(err)
	}
	d.written = append(d.written, ev)
	d.opCount["write"]++
	sent := time.Now()
	ok, err := d.publish(n, ev)
	if err != nil {
		d.t.Fatalf("op %d: publish %s at node %d: %v\n%s", seq, what, n.i, err, tail(n.proc.output(), 4000))
	}
	d.logOp(seq, "node %d: %s %s by %s: OK %v %q", n.i, what, ev.ID[:8], u.pubHex[:8], ok.Accepted, ok.Message)
	d.checks++
	probe := &modelEvent{ev: ev, exp: expirationOf(ev), node: n.i, seq: seq}
	if !ok.Accepted {
		_, deadAnywhere := d.model.killedBy(probe, everything)
		if !deadAnywhere && !probe.expiredBy(time.Now().Unix()) {
			d.violate(seq, n, fmt.Sprintf("refused-write: refused %s (%s): %q, which one relay with every acknowledged event would take", ev.ID, what, ok.Message))
		}
		return ev
	}
	if k, dead := d.model.killedBy(probe, func(id string) bool { return n.must[id] }); dead {
		d.violate(seq, n, fmt.Sprintf("accepted-dead-write: took %s (%s) though it holds %s (%s, op %d)", ev.ID, what, k.by.ev.ID, k.rule, k.by.seq))
	}
	d.model.add(ev, n.i, seq)
	n.seen[ev.ID] = sent
	n.must[ev.ID] = true
	return ev
}

// randomFilter picks a read: by ids, author, kind, tag or time window.
func (d *diffRun) randomFilter(seq int, u *user) *modelFilter {
	f := &modelFilter{}
	switch d.r.IntN(6) {
	case 0:
		if len(d.written) == 0 {
			f.Authors = []string{u.pubHex}
			break
		}
		for range 1 + d.r.IntN(5) {
			if id := d.written[d.r.IntN(len(d.written))].ID; !slices.Contains(f.IDs, id) {
				f.IDs = append(f.IDs, id)
			}
		}
	case 1:
		f.Authors = []string{u.pubHex}
	case 2:
		f.Authors = []string{u.pubHex}
		f.Kinds = []int{[]int{0, 1, 3, 5, 10002, 30023}[d.r.IntN(6)]}
	case 3:
		f.Kinds = []int{[]int{0, 1, 3, 5, 10002, 30023}[d.r.IntN(6)]}
	case 4:
		if d.r.IntN(2) == 0 {
			f.T = []string{tagPool[d.r.IntN(len(tagPool))]}
		} else {
			f.D = []string{dPool[d.r.IntN(len(dPool))]}
			f.Kinds = []int{30023}
		}
	default:
		lo := d.base + int64(d.r.IntN(seq+1))
		hi := lo + int64(5+d.r.IntN(30))
		f.Since, f.Until = &lo, &hi
		if d.r.IntN(2) == 0 {
			f.Authors = []string{u.pubHex}
		}
	}
	return f
}

// read runs one REQ at n and checks its answer.
func (d *diffRun) read(seq int, n *diffNode, f *modelFilter) {
	d.opCount["read"]++
	got, t0, t1, err := d.query(n, f)
	if err != nil {
		d.t.Fatalf("op %d: REQ %s at node %d: %v\n%s", seq, f, n.i, err, tail(n.proc.output(), 4000))
	}
	d.logOp(seq, "node %d: REQ %s: %d events", n.i, f, len(got))
	whole := len(d.up()) == len(d.nodes)
	for _, o := range d.nodes {
		whole = whole && !o.cut
	}
	d.latency[whole] = append(d.latency[whole], t1.Sub(t0))
	for _, v := range d.checkRead(n, f, got, t0, t1) {
		d.violate(seq, n, v)
	}
}

// checkRead checks a read at n, sent at t0 and answered by t1, against
// the model and what n had seen by t0, and records what n served as seen
// by n.
func (d *diffRun) checkRead(n *diffNode, f *modelFilter, got []event, t0, t1 time.Time) []string {
	d.checks++
	v := d.model.violations(readCheck{f: f, got: got, lo: t0.Unix(), hi: t1.Unix(),
		seen: func(id string) bool { at, ok := n.seen[id]; return ok && !at.After(t0) },
		must: func(id string) bool { return n.must[id] },
	})
	for _, e := range got {
		if _, ok := n.seen[e.ID]; !ok {
			n.seen[e.ID] = t1
		}
	}
	return v
}

// query runs a REQ at n and returns its stored events and when it was
// sent and answered.
func (d *diffRun) query(n *diffNode, f *modelFilter) (got []event, t0, t1 time.Time, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), diffOpTimeout)
	defer cancel()
	t0 = time.Now()
	c, err := d.dial(ctx, n)
	if err != nil {
		return nil, t0, t0, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	got, err = storedEvents(c, "diff", filterJSON(f))
	return got, t0, time.Now(), err
}

// filterJSON is a filter as the map storedEvents sends.
func filterJSON(f *modelFilter) map[string]any {
	var m map[string]any
	raw, _ := json.Marshal(f)
	json.Unmarshal(raw, &m)
	return m
}

// dial opens a WebSocket to n's relay from inside its namespace.
func (d *diffRun) dial(ctx context.Context, n *diffNode) (*websocket.Conn, error) {
	dl := websocket.Dialer{NetDialContext: d.lab.dialer(n.ns), HandshakeTimeout: diffOpTimeout}
	c, _, err := dl.DialContext(ctx, "ws://"+labRelayListen, nil)
	return c, err
}

func (d *diffRun) publish(n *diffNode, ev *event) (okMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), diffOpTimeout)
	defer cancel()
	c, err := d.dial(ctx, n)
	if err != nil {
		return okMessage{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	return publishOne(c, ev)
}

// diffSub is a live subscription the run holds open.
type diffSub struct {
	node     *diffNode
	restarts int // the node's restarts when it opened
	f        *modelFilter
	seq      int // the operation that opened it
	c        *websocket.Conn
	mu       sync.Mutex
	got      []liveEvent
	ended    chan struct{}
}

// liveEvent is an event a subscription delivered after EOSE.
type liveEvent struct {
	ev event
	at time.Time
}

// subscribe opens a live subscription at n for u's events, a kind or a
// tag, unless diffMaxSubs are open (then it reads instead).
func (d *diffRun) subscribe(seq int, n *diffNode, u *user) {
	f := &modelFilter{}
	switch d.r.IntN(3) {
	case 0:
		f.Authors = []string{u.pubHex}
	case 1:
		f.Kinds = []int{[]int{1, 5, 30023}[d.r.IntN(3)]}
	default:
		f.T = []string{tagPool[d.r.IntN(len(tagPool))]}
	}
	if len(d.subs) >= diffMaxSubs {
		d.read(seq, n, f)
		return
	}
	d.opCount["subscribe"]++
	ctx, cancel := context.WithTimeout(context.Background(), diffOpTimeout)
	defer cancel()
	c, err := d.dial(ctx, n)
	if err != nil {
		d.t.Fatalf("op %d: subscribe at node %d: %v", seq, n.i, err)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	t0 := time.Now()
	req, _ := json.Marshal([]any{"REQ", "live", filterJSON(f)})
	if err := c.WriteMessage(websocket.TextMessage, req); err != nil {
		d.t.Fatalf("op %d: subscribe at node %d: %v", seq, n.i, err)
	}
	// The stored part up to EOSE is a read like any other.
	var stored []event
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			d.t.Fatalf("op %d: subscription at node %d before EOSE: %v", seq, n.i, err)
		}
		typ, e := parseRelayMessage(data)
		if typ == "EOSE" {
			break
		}
		if typ == "EVENT" {
			stored = append(stored, e)
		}
	}
	stop()
	d.logOp(seq, "node %d: subscribe %s: %d stored events", n.i, f, len(stored))
	for _, v := range d.checkRead(n, f, stored, t0, time.Now()) {
		d.violate(seq, n, v)
	}
	s := &diffSub{node: n, restarts: n.restarts, f: f, seq: seq, c: c, ended: make(chan struct{})}
	go func() {
		// Owned by the subscription: ends when its connection closes.
		defer close(s.ended)
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if typ, e := parseRelayMessage(data); typ == "EVENT" {
				s.mu.Lock()
				s.got = append(s.got, liveEvent{e, time.Now()})
				s.mu.Unlock()
			}
		}
	}()
	d.t.Cleanup(func() { c.Close(); <-s.ended })
	d.subs = append(d.subs, s)
}

// parseRelayMessage returns a relay message's type and, for EVENT, the
// event.
func parseRelayMessage(data []byte) (string, event) {
	var msg []json.RawMessage
	var typ string
	var e event
	if json.Unmarshal(data, &msg) != nil || len(msg) < 2 || json.Unmarshal(msg[0], &typ) != nil {
		return "", e
	}
	if typ == "EVENT" && len(msg) >= 3 {
		json.Unmarshal(msg[2], &e)
	}
	return typ, e
}

// checkpoint stops writing and waits, for at most convergeBound, until
// every node serves what the model serves, every read on the way checked
// like any other; then it checks and closes the live subscriptions. A
// node's convergence time is from the checkpoint (the last write's OK) to
// the first round of polls in which it agreed.
func (d *diffRun) checkpoint(seq int) {
	d.opCount["checkpoint"]++
	start := time.Now()
	var ids []string
	for _, e := range d.written {
		ids = append(ids, e.ID)
	}
	// One filter per author keeps each answer under the relay's default
	// limit (500) in the long run too.
	var filters []*modelFilter
	for _, u := range d.users {
		filters = append(filters, &modelFilter{Authors: []string{u.pubHex}})
	}
	for i := 0; i < len(ids); i += 100 {
		filters = append(filters, &modelFilter{IDs: ids[i:min(i+100, len(ids))]})
	}
	deadline := start.Add(convergeBound)
	pending := slices.Clone(d.nodes)
	differs := map[*diffNode][]string{}
	for len(pending) > 0 {
		var still []*diffNode
		for _, n := range pending {
			var diff []string
			for _, f := range filters {
				got, t0, t1, err := d.query(n, f)
				if err != nil {
					diff = append(diff, fmt.Sprintf("REQ %s: %v", f, err))
					continue
				}
				// On the way there, a read is held to what the node has
				// seen; once converged, to the model exactly.
				for _, v := range d.checkRead(n, f, got, t0, t1) {
					d.violate(seq, n, "while converging: "+v)
				}
				for _, v := range d.model.violations(readCheck{f: f, got: got, lo: t0.Unix(), hi: t1.Unix(), seen: everything, must: everything}) {
					diff = append(diff, fmt.Sprintf("REQ %s: %s", f, v))
				}
			}
			if len(diff) > 0 {
				differs[n] = diff
				still = append(still, n)
				continue
			}
			d.converge = append(d.converge, time.Since(start))
			now := time.Now()
			for id := range d.model.events {
				n.must[id] = true
				if _, ok := n.seen[id]; !ok {
					n.seen[id] = now
				}
			}
		}
		pending = still
		if len(pending) > 0 && time.Now().After(deadline) {
			for _, n := range pending {
				diff := differs[n]
				d.violate(seq, n, fmt.Sprintf("not-converged: %s after the last write the node still differs from one relay:\n  %s",
					convergeBound, strings.Join(diff[:min(10, len(diff))], "\n  ")))
			}
			break
		}
		if len(pending) > 0 {
			time.Sleep(250 * time.Millisecond)
		}
	}
	d.logOp(seq, "checkpoint: converged in %s", time.Since(start).Round(time.Millisecond))
	d.closeSubs(seq, time.Now().Add(liveGrace))
}

// closeSubs checks every open subscription and closes it. Safety: no
// delivered event was dead, at its node, before it was even written.
// Completeness (only for a subscription whose node ran throughout): it
// received every event written after it opened that matches and is live
// in the model, unless the event carries an expiration and was written
// at another node (it may expire before it gets there).
func (d *diffRun) closeSubs(seq int, deadline time.Time) {
	for _, s := range d.subs {
		n := s.node
		var missing []string
		for {
			s.mu.Lock()
			got := slices.Clone(s.got)
			s.mu.Unlock()
			have := map[string]bool{}
			missing = missing[:0]
			for _, le := range got {
				have[le.ev.ID] = true
			}
			if s.restarts == n.restarts {
				live, _ := d.model.answer(s.f, time.Now().Unix(), time.Now().Unix())
				for id, e := range live {
					if e.seq > s.seq && !have[id] && (e.exp == 0 || e.node == n.i) {
						missing = append(missing, fmt.Sprintf("%s (kind %d, op %d at node %d)", id, e.ev.Kind, e.seq, e.node))
					}
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				d.checkLive(seq, s, got)
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		d.checks++
		if len(missing) > 0 {
			slices.Sort(missing)
			d.violate(seq, n, fmt.Sprintf("live-missing: the subscription %s opened at op %d never received %d live events written after it: %s",
				s.f, s.seq, len(missing), strings.Join(missing[:min(5, len(missing))], ", ")))
		}
		s.c.Close()
		<-s.ended
	}
	d.subs = nil
}

// checkLive checks each event a subscription delivered: acknowledged,
// matching, and not dead at the node before it was written.
func (d *diffRun) checkLive(seq int, s *diffSub, got []liveEvent) {
	n := s.node
	for _, le := range got {
		d.checks++
		me, ok := d.model.events[le.ev.ID]
		if !ok {
			d.violate(seq, n, fmt.Sprintf("live-unknown: subscription %s delivered %s, which no node acknowledged", s.f, le.ev.ID))
			continue
		}
		if !s.f.matches(me.ev) {
			d.violate(seq, n, fmt.Sprintf("live-mismatch: subscription %s delivered %s, which does not match", s.f, le.ev.ID))
		}
		if _, ok := n.seen[le.ev.ID]; !ok {
			n.seen[le.ev.ID] = le.at
		}
		// Written at op me.seq: its write began after every operation
		// before it ended, so what the node had seen by then it held
		// before this event existed.
		born := d.started[me.seq]
		if k, dead := d.model.killedBy(me, func(id string) bool { at, ok := n.seen[id]; return ok && at.Before(born) }); dead {
			d.violate(seq, n, fmt.Sprintf("live-%s: subscription %s delivered %s (op %d) though the node had seen %s (op %d) before it was written",
				k.rule, s.f, le.ev.ID, me.seq, k.by.ev.ID, k.by.seq))
		}
	}
}
