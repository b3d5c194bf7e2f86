//go:build linux

package mesh

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corecm "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/nostr"
)

// The scale run measures how one node's cost grows with the size of the
// mesh when what the node subscribes to stays the same. Every node runs the
// whole mesh as the node does (GossipSub with scoring and topic discovery,
// the /fleetmesh DHT in server mode, peer exchange of signed descriptors,
// discovery dialling below the low water mark) on a mocknet host to which a
// real go-libp2p connection manager is attached, so that connections are
// trimmed as on a real host. The workload is the same at every size: the
// same events on the same active shards at the same rate, and the same
// number of those shards per node. Figures are process totals divided by
// the number of nodes.

// scaleWorkload is what stays fixed across the sizes of one scale run.
type scaleWorkload struct {
	// activeShards carry the run's events (one author each);
	// shardsPerNode of them, chosen at random per node, are each node's
	// subscription, so each node receives shardsPerNode/activeShards of
	// the events at every size.
	activeShards  int
	shardsPerNode int
	// events are published mesh-wide, spread evenly over the active
	// shards, at rate per second, each by a random subscriber of its shard
	// (the node of the author's own relay holds the author's shard).
	events int
	rate   float64
	// connLow and connHigh are the connection manager's water marks, and
	// discovery dials while below connLow; connGrace protects new
	// connections from trimming.
	connLow, connHigh int
	connGrace         time.Duration
	// bootstrap is how many random other nodes each node is configured
	// with.
	bootstrap int
	// maintain is Config.MaintainInterval (dialling and peer exchange).
	maintain time.Duration
	// settle is how long after the last node started the measuring waits
	// at least, so that the windows see the steady state: past connGrace
	// and a trimming round of the connection manager (every 10 s), and
	// past GossipSub's retry of topic advertisements that failed while the
	// DHT was still empty (2 minutes).
	settle time.Duration
	// check is how often the warm-up looks whether the mesh has settled.
	check time.Duration
	// idle is the window measured with nothing published.
	idle time.Duration
	// warmup bounds the wait for every active shard's GossipSub mesh to
	// connect its subscribers; drain bounds the wait for deliveries after
	// the last publication.
	warmup, drain time.Duration
}

// scaleWindow is what one measuring window saw, per node.
type scaleWindow struct {
	seconds    float64
	cores      float64 // process CPU / wall time
	maxLag     time.Duration
	cpu        float64            // CPU µs per node
	gossipSent float64            // GossipSub RPC bytes sent per node
	gossipRecv float64            // GossipSub RPC bytes received per node
	streams    map[string]float64 // stream bytes sent per node, per protocol family
	messages   float64            // event messages received per node, duplicates included
	delivered  float64            // events handed to the Sink per node
	ihave      float64            // message ids in IHAVE received per node
	iwant      float64            // message ids in IWANT received per node
	opened     float64            // connections opened per node
}

func (w scaleWindow) streamTotal() float64 {
	var t float64
	for _, v := range w.streams {
		t += v
	}
	return t
}

// scaleResult is one size's figures.
type scaleResult struct {
	nodes int

	started   time.Duration // creating and starting every node
	warmup    time.Duration // start to every shard mesh connected and settled
	warmed    bool          // settled (meshes connected, churn quiet) within the warmup bound
	warmupCPU time.Duration // per node, start to settled
	linkHeap  float64       // MiB of mocknet's link table (N²/2 links), not counted below

	idle, busy scaleWindow
	events     int
	p50, p99   time.Duration
	late       int // deliveries later than 1 s
	missing    int // deliveries still missing at the drain bound
	load       string

	heapKB       float64 // live heap per node after GC
	stackKB      float64 // goroutine stacks per node
	rssKB        float64 // process RSS growth per node, link table included
	goroutines   float64 // per node
	conns        float64 // mean connections per node
	connsMax     int
	peersKnown   float64 // mean peerstore size
	routingTable float64 // mean DHT routing table size
	pexKnown     float64 // mean descriptors held for peer exchange
	churn        float64 // GRAFT+PRUNE received per node over the whole run
}

// Protocol families the stream byte counts are kept under.
const (
	protoGossip = "gossipsub"
	protoDHT    = "dht"
	protoPEX    = "pex"
	protoOther  = "other"
)

var scaleProtos = []string{protoGossip, protoDHT, protoPEX, protoOther}

// streamBytes counts application bytes written to libp2p streams, per
// protocol family. mocknet adds no framing: on a real host yamux, Noise and
// TCP/IP headers come on top.
type streamBytes struct {
	gossip, dht, pex, other atomic.Uint64
}

func (c *streamBytes) add(p protocol.ID, n int) {
	s := string(p)
	switch {
	case strings.HasPrefix(s, "/meshsub/") || strings.HasPrefix(s, "/floodsub/"):
		c.gossip.Add(uint64(n))
	case strings.HasPrefix(s, string(DHTProtocolPrefix)+"/kad/"):
		c.dht.Add(uint64(n))
	case p == peerexchange.Protocol:
		c.pex.Add(uint64(n))
	default:
		c.other.Add(uint64(n))
	}
}

// scaleHost is a mocknet host with a real connection manager attached the
// way libp2p.New attaches one (notified of every connection, and the one
// GossipSub and the DHT tag and protect peers in), with the bytes its
// streams send and the connections it opens counted. Identify runs inside
// the mocknet host; its bytes are not counted.
type scaleHost struct {
	host.Host
	cm     *connmgr.BasicConnMgr
	sent   streamBytes
	opened atomic.Uint64
}

func newScaleHost(h host.Host, w scaleWorkload) (*scaleHost, error) {
	cm, err := connmgr.NewConnManager(w.connLow, w.connHigh, connmgr.WithGracePeriod(w.connGrace))
	if err != nil {
		return nil, err
	}
	sh := &scaleHost{Host: h, cm: cm}
	h.Network().Notify(cm.Notifee())
	h.Network().Notify(&network.NotifyBundle{
		ConnectedF: func(network.Network, network.Conn) { sh.opened.Add(1) },
	})
	return sh, nil
}

func (h *scaleHost) ConnManager() corecm.ConnManager { return h.cm }

func (h *scaleHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	return &countedStream{Stream: s, sent: &h.sent}, nil
}

func (h *scaleHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, h.counting(handler))
}

func (h *scaleHost) SetStreamHandlerMatch(pid protocol.ID, match func(protocol.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, match, h.counting(handler))
}

func (h *scaleHost) counting(handler network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) { handler(&countedStream{Stream: s, sent: &h.sent}) }
}

type countedStream struct {
	network.Stream
	sent *streamBytes
}

func (s *countedStream) Write(p []byte) (int, error) {
	n, err := s.Stream.Write(p)
	s.sent.add(s.Stream.Protocol(), n)
	return n, err
}

// arrivalSink is the run's Sink: it keeps when each event first arrived
// (the mesh's validator has verified it already) and how many arrived.
type arrivalSink struct {
	n  atomic.Int64
	mu sync.Mutex
	at map[[32]byte]time.Time
}

func (s *arrivalSink) Ingest(_ context.Context, ev *nostr.Event, _ peer.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[ev.ID]; !ok {
		s.at[ev.ID] = time.Now()
		s.n.Add(1)
	}
	return nil
}

func (s *arrivalSink) arrived(id [32]byte) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[id]
	return t, ok
}

// lagMeter measures the worst delay of a 10 ms ticker: how long a runnable
// goroutine can wait for a CPU, in the process or on the machine.
type lagMeter struct {
	max  atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func startLagMeter() *lagMeter {
	l := &lagMeter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		const tick = 10 * time.Millisecond
		tk := time.NewTicker(tick)
		defer tk.Stop()
		last := time.Now()
		for {
			select {
			case <-l.stop:
				return
			case now := <-tk.C:
				if lag := int64(now.Sub(last) - tick); lag > l.max.Load() {
					l.max.Store(lag)
				}
				last = now
			}
		}
	}()
	return l
}

// reset returns the worst lag since the last reset.
func (l *lagMeter) reset() time.Duration { return time.Duration(l.max.Swap(0)) }

func (l *lagMeter) close() {
	close(l.stop)
	<-l.done
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processRSS is the process's resident set size in bytes.
func processRSS(t testing.TB) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("read RSS: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parse RSS %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage(t testing.TB) string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatalf("read load average: %v", err)
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// memory is the live heap and goroutine stacks after a full collection.
func memory() (heap, stack uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// scaleSnapshot is the process's counters at one instant.
type scaleSnapshot struct {
	at     time.Time
	cpu    time.Duration
	stats  Stats // summed over the nodes; the maps are left empty
	stream map[string]uint64
	opened uint64
}

func snapshot(t testing.TB, nodes []*testNode, hosts []*scaleHost) scaleSnapshot {
	s := scaleSnapshot{at: time.Now(), cpu: processCPU(t), stream: map[string]uint64{}}
	for i, n := range nodes {
		st := n.m.Stats()
		s.stats.RPCBytesSent += st.RPCBytesSent
		s.stats.RPCBytesReceived += st.RPCBytesReceived
		s.stats.MessagesReceived += st.MessagesReceived
		s.stats.Delivered += st.Delivered
		s.stats.IHaveReceived += st.IHaveReceived
		s.stats.IWantReceived += st.IWantReceived
		s.stats.GraftsReceived += st.GraftsReceived
		s.stats.PrunesReceived += st.PrunesReceived
		h := hosts[i]
		s.stream[protoGossip] += h.sent.gossip.Load()
		s.stream[protoDHT] += h.sent.dht.Load()
		s.stream[protoPEX] += h.sent.pex.Load()
		s.stream[protoOther] += h.sent.other.Load()
		s.opened += h.opened.Load()
	}
	return s
}

// window turns two snapshots into per-node figures.
func window(a, b scaleSnapshot, count int, lag time.Duration) scaleWindow {
	n := float64(count)
	per := func(x, y uint64) float64 { return float64(y-x) / n }
	w := scaleWindow{
		seconds:    b.at.Sub(a.at).Seconds(),
		maxLag:     lag,
		cpu:        float64(b.cpu-a.cpu) / float64(time.Microsecond) / n,
		gossipSent: per(a.stats.RPCBytesSent, b.stats.RPCBytesSent),
		gossipRecv: per(a.stats.RPCBytesReceived, b.stats.RPCBytesReceived),
		messages:   per(a.stats.MessagesReceived, b.stats.MessagesReceived),
		delivered:  per(a.stats.Delivered, b.stats.Delivered),
		ihave:      per(a.stats.IHaveReceived, b.stats.IHaveReceived),
		iwant:      per(a.stats.IWantReceived, b.stats.IWantReceived),
		opened:     per(a.opened, b.opened),
		streams:    map[string]float64{},
	}
	w.cores = float64(b.cpu-a.cpu) / float64(b.at.Sub(a.at))
	for _, p := range scaleProtos {
		w.streams[p] = per(a.stream[p], b.stream[p])
	}
	return w
}

// runScale builds a mesh of count nodes, runs w on it and measures; logf
// reports progress.
func runScale(t testing.TB, count int, w scaleWorkload, logf func(string, ...any)) scaleResult {
	res := scaleResult{nodes: count, events: w.events}
	goroutines0 := runtime.NumGoroutine()
	heap0, stack0 := memory()
	rss0 := processRSS(t)
	lag := startLagMeter()
	defer lag.close()

	authors := authorsOnDistinctShards(t, w.activeShards)
	mn := mocknet.New()
	nodes := make([]*testNode, count)
	hosts := make([]*scaleHost, count)
	subs := make([][]int, count) // indexes into authors
	sinks := make([]*arrivalSink, count)
	for i := range nodes {
		key := newKey(t)
		addr := mockAddr(t, i+1)
		h, err := mn.AddPeer(key.Libp2pKey(), addr)
		if err != nil {
			t.Fatal(err)
		}
		if hosts[i], err = newScaleHost(h, w); err != nil {
			t.Fatal(err)
		}
		nodes[i] = &testNode{key: key, h: hosts[i], addr: addr}
		subs[i] = rand.Perm(w.activeShards)[:w.shardsPerNode]
		sinks[i] = &arrivalSink{at: map[[32]byte]time.Time{}}
	}
	heapHosts, _ := memory()
	// Any node may dial any other, as on the Internet; mocknet needs a link
	// per pair for that, which costs the test N²/2 objects no node holds.
	for i := range nodes {
		for j := i + 1; j < count; j++ {
			if _, err := mn.LinkPeers(nodes[i].h.ID(), nodes[j].h.ID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	heapLinked, _ := memory()
	linkHeap := heapLinked - heapHosts
	res.linkHeap = float64(linkHeap) / (1 << 20)
	defer func() {
		t0 := time.Now()
		closeMeshes(t, nodes)
		for _, h := range hosts {
			if err := h.cm.Close(); err != nil {
				t.Errorf("close connection manager: %v", err)
			}
		}
		if err := mn.Close(); err != nil {
			t.Errorf("close mocknet: %v", err)
		}
		logf("nodes=%d: closed in %v", count, time.Since(t0))
	}()

	cpu0 := processCPU(t)
	t0 := time.Now()
	for i, n := range nodes {
		cfg := Config{
			ListenAddrs:      []string{},
			DHT:              DHTServer,
			ConnLowWater:     w.connLow,
			ConnHighWater:    w.connHigh,
			ConnGracePeriod:  w.connGrace,
			MaintainInterval: w.maintain,
		}
		for _, j := range rand.Perm(count - 1)[:min(w.bootstrap, count-1)] {
			if j >= i {
				j++ // not itself
			}
			cfg.Bootstrap = append(cfg.Bootstrap, nodes[j].p2pAddr())
		}
		// A verifier per node, as each node has one: it remembers
		// sequence numbers to refuse replays.
		n.start(t, cfg, Hooks{Sink: sinks[i], VerifyDescriptor: peerexchange.VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{}))})
		if err := n.m.SetLocalDescriptor(signDescriptor(t, n, 1)); err != nil {
			t.Fatal(err)
		}
		var shards []int
		for _, a := range subs[i] {
			shards = append(shards, authors[a].shard)
		}
		if err := n.m.Subscribe(shards...); err != nil {
			t.Fatal(err)
		}
		if (i+1)%250 == 0 {
			logf("nodes=%d: %d started in %v", count, i+1, time.Since(t0).Round(time.Second))
		}
	}
	res.started = time.Since(t0)
	subscribers := make([][]int, w.activeShards)
	for i, s := range subs {
		for _, a := range s {
			subscribers[a] = append(subscribers[a], i)
		}
	}
	connectedShards := func() int {
		c := 0
		for a, au := range authors {
			if shardGraphConnected(t, nodes, subscribers[a], nil, au.shard) {
				c++
			}
		}
		return c
	}
	// Settled: past w.settle, every shard's mesh connected, and in the
	// last w.check the nodes opened under one connection per minute each
	// (the start's DHT lookups, topic advertisements and trimming are over).
	settleAt := time.Now().Add(w.settle)
	deadline := t0.Add(w.warmup)
	prev := snapshot(t, nodes, hosts)
	for {
		time.Sleep(w.check)
		now := time.Now()
		connected := connectedShards()
		cur := snapshot(t, nodes, hosts)
		win := window(prev, cur, count, lag.reset())
		prev = cur
		var conns int
		for _, h := range hosts {
			conns += len(h.Network().Conns())
		}
		churn := win.opened / win.seconds * 60
		logf("nodes=%d: +%.0fs shards connected %d/%d, conns/node %.1f, opened/node/min %.1f, cores %.2f, max lag %v, dht B/node/s %.0f, pex B/node/s %.0f",
			count, now.Sub(t0).Seconds(), connected, w.activeShards, float64(conns)/float64(count),
			churn, win.cores, win.maxLag.Round(time.Millisecond),
			win.streams[protoDHT]/win.seconds, win.streams[protoPEX]/win.seconds)
		if now.After(settleAt) && connected == w.activeShards && churn < 1 {
			res.warmed = true
			break
		}
		if now.After(deadline) {
			logf("nodes=%d: not settled within %v (meshes connected and churn below 1/node/min); measuring anyway", count, w.warmup)
			break
		}
	}
	res.warmup = time.Since(t0)
	res.warmupCPU = (processCPU(t) - cpu0) / time.Duration(count)

	// FLEETMESH_SCALE_PROFILE=DIR writes a CPU profile of the two windows
	// and a heap profile at their end into DIR, per size (it cannot be
	// used with -cpuprofile).
	profileDir := os.Getenv("FLEETMESH_SCALE_PROFILE")
	if profileDir != "" {
		f, err := os.Create(filepath.Join(profileDir, fmt.Sprintf("cpu-%d.pprof", count)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
	}

	// Idle window: the mesh's background cost with nothing published.
	lag.reset()
	s0 := snapshot(t, nodes, hosts)
	time.Sleep(w.idle)
	s1 := snapshot(t, nodes, hosts)
	res.idle = window(s0, s1, count, lag.reset())

	// Busy window: publish the events, then wait for every subscriber.
	type published struct {
		ev    *nostr.Event
		shard int // index into authors
		from  int
		at    time.Time
	}
	pubs := make([]published, w.events)
	want := make([]int64, count) // deliveries each node should see
	for k := range pubs {
		a := k % w.activeShards
		from := subscribers[a][rand.IntN(len(subscribers[a]))]
		pubs[k] = published{ev: authors[a].event(t, 1, fmt.Sprintf("scale event %d", k)), shard: a, from: from}
		for _, i := range subscribers[a] {
			if i != from {
				want[i]++
			}
		}
	}
	base := make([]int64, count)
	for i, s := range sinks {
		base[i] = s.n.Load()
	}
	lag.reset()
	s2 := snapshot(t, nodes, hosts)
	interval := time.Duration(float64(time.Second) / w.rate)
	for k := range pubs {
		if d := time.Until(s2.at.Add(time.Duration(k) * interval)); d > 0 {
			time.Sleep(d)
		}
		pubs[k].at = time.Now()
		if err := nodes[pubs[k].from].m.Publish(context.Background(), pubs[k].ev); err != nil {
			t.Fatal(err)
		}
	}
	drainBy := time.Now().Add(w.drain)
	for time.Now().Before(drainBy) {
		done := true
		for i, s := range sinks {
			if s.n.Load()-base[i] < want[i] {
				done = false
				break
			}
		}
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s3 := snapshot(t, nodes, hosts)
	res.busy = window(s2, s3, count, lag.reset())
	if profileDir != "" {
		pprof.StopCPUProfile()
		f, err := os.Create(filepath.Join(profileDir, fmt.Sprintf("heap-%d.pprof", count)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		runtime.GC()
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	res.load = loadAverage(t)
	var latencies []time.Duration
	for _, p := range pubs {
		for _, i := range subscribers[p.shard] {
			if i == p.from {
				continue
			}
			at, ok := sinks[i].arrived(p.ev.ID)
			if !ok {
				res.missing++
				continue
			}
			latencies = append(latencies, at.Sub(p.at))
			if at.Sub(p.at) > time.Second {
				res.late++
			}
		}
	}
	// A node holds nothing of the shards it does not subscribe to.
	for i, s := range sinks {
		for _, p := range pubs {
			if _, ok := s.arrived(p.ev.ID); ok && !slices.Contains(subs[i], p.shard) {
				t.Errorf("nodes=%d: node %d received an event of a shard it does not subscribe to", count, i)
			}
		}
	}
	slices.Sort(latencies)
	if len(latencies) > 0 {
		res.p50 = latencies[(len(latencies)-1)/2]
		res.p99 = latencies[int(0.99*float64(len(latencies)-1))]
	}

	// State per node at the end.
	var conns, peers, rt, pexKnown int
	for i, n := range nodes {
		c := len(hosts[i].Network().Conns())
		conns += c
		res.connsMax = max(res.connsMax, c)
		peers += len(n.h.Peerstore().Peers())
		rt += n.m.dht.RoutingTable().Size()
		pexKnown += n.m.pex.Known()
	}
	perNode := func(v float64) float64 { return v / float64(count) }
	res.conns, res.peersKnown, res.routingTable, res.pexKnown = perNode(float64(conns)), perNode(float64(peers)), perNode(float64(rt)), perNode(float64(pexKnown))
	res.churn = perNode(float64(s3.stats.GraftsReceived + s3.stats.PrunesReceived))
	res.goroutines = perNode(float64(runtime.NumGoroutine() - goroutines0))
	heap, stack := memory()
	res.heapKB = perNode(float64(int64(heap)-int64(heap0)-int64(linkHeap)) / 1024)
	res.stackKB = perNode(float64(int64(stack)-int64(stack0)) / 1024)
	res.rssKB = perNode(float64(int64(processRSS(t))-int64(rss0)) / 1024)
	return res
}

// scaleWorkloadDefault is the benchmark's workload: 16 active shards, 4 per
// node (each node receives a quarter of the events at every size), 120
// events at 2 per second (what 1,000 nodes in one process on 2 shared cores
// can take without queueing), connections held between 32 and 64 per node.
func scaleWorkloadDefault() scaleWorkload {
	return scaleWorkload{
		activeShards:  16,
		shardsPerNode: 4,
		events:        120,
		rate:          2,
		connLow:       32,
		connHigh:      64,
		connGrace:     30 * time.Second,
		bootstrap:     3,
		maintain:      30 * time.Second, // the mesh's default
		settle:        150 * time.Second,
		check:         15 * time.Second,
		idle:          60 * time.Second, // two maintenance rounds: peer exchange comes in bursts
		warmup:        20 * time.Minute,
		drain:         2 * time.Minute,
	}
}

// BenchmarkScale is the scale run: 50 to 1,000 nodes, one size after the
// other in one process, each with the same workload; it prints a table of
// per-node figures with each as a ratio against the smallest size run.
// It takes about an hour and is not part of the normal suite.
// FLEETMESH_SCALE_NODES (such as 50,100,250,500) picks other sizes.
//
//	go test -run '^$' -bench BenchmarkScale -benchtime 1x -timeout 3h ./mesh/
func BenchmarkScale(b *testing.B) {
	w := scaleWorkloadDefault()
	logf := func(format string, args ...any) { fmt.Printf("scale: "+format+"\n", args...) }
	var results []scaleResult
	sizes := []int{50, 100, 250, 500, 1000}
	if env := os.Getenv("FLEETMESH_SCALE_NODES"); env != "" {
		sizes = sizes[:0]
		for f := range strings.SplitSeq(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("FLEETMESH_SCALE_NODES=%q: want comma-separated node counts of 2 or more, such as 50,100,500", env)
			}
			sizes = append(sizes, n)
		}
	}
	for _, count := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", count), func(b *testing.B) {
			var r scaleResult
			for b.Loop() {
				r = runScale(b, count, w, logf)
			}
			results = append(results, r)
			ev := float64(r.events)
			b.ReportMetric(r.p50.Seconds()*1000, "p50-ms")
			b.ReportMetric(r.p99.Seconds()*1000, "p99-ms")
			b.ReportMetric(r.busy.gossipSent/ev, "gossipB-sent/node/event")
			b.ReportMetric(r.busy.streamTotal()/ev, "streamB-sent/node/event")
			b.ReportMetric(r.busy.messages/ev, "msgs/node/event")
			b.ReportMetric(r.busy.cpu/ev, "cpu-µs/node/event")
			b.ReportMetric(r.idle.cpu/r.idle.seconds/1000, "idle-cpu-ms/node/s")
			b.ReportMetric(r.heapKB, "heap-KiB/node")
			b.ReportMetric(r.goroutines, "goroutines/node")
			b.ReportMetric(r.conns, "conns/node")
			b.ReportMetric(0, "ns/op") // wall time is the run's length, not a figure of merit
			// A benchmark's log is cut short: the table goes to standard
			// output, after each size so that a run stopped early keeps
			// what it measured.
			fmt.Println(scaleTable(w, results))
		})
	}
}

// scaleTable renders results as Markdown: the figures, then each as a
// ratio against the first (smallest) size.
func scaleTable(w scaleWorkload, rs []scaleResult) string {
	perEvent := func(f func(r scaleResult) float64) func(r scaleResult) float64 {
		return func(r scaleResult) float64 { return f(r) / float64(r.events) }
	}
	perSecond := func(f func(r scaleResult) float64) func(r scaleResult) float64 {
		return func(r scaleResult) float64 { return f(r) / r.idle.seconds }
	}
	type row struct {
		name string
		f    func(r scaleResult) float64
		fmt  string
	}
	rows := []row{
		{"**per event published** (busy window)", nil, ""},
		{"GossipSub B sent /node/event", perEvent(func(r scaleResult) float64 { return r.busy.gossipSent }), "%.0f"},
		{"GossipSub B received /node/event", perEvent(func(r scaleResult) float64 { return r.busy.gossipRecv }), "%.0f"},
		{"all streams B sent /node/event", perEvent(func(r scaleResult) float64 { return r.busy.streamTotal() }), "%.0f"},
		{"… of which DHT", perEvent(func(r scaleResult) float64 { return r.busy.streams[protoDHT] }), "%.0f"},
		{"… of which PEX", perEvent(func(r scaleResult) float64 { return r.busy.streams[protoPEX] }), "%.0f"},
		{"messages received /node/event", perEvent(func(r scaleResult) float64 { return r.busy.messages }), "%.3f"},
		{"events delivered /node/event", perEvent(func(r scaleResult) float64 { return r.busy.delivered }), "%.3f"},
		{"IHAVE ids received /node/event", perEvent(func(r scaleResult) float64 { return r.busy.ihave }), "%.2f"},
		{"IWANT ids received /node/event", perEvent(func(r scaleResult) float64 { return r.busy.iwant }), "%.3f"},
		{"CPU µs /node/event", perEvent(func(r scaleResult) float64 { return r.busy.cpu }), "%.0f"},
		{"… above the idle window's rate", perEvent(func(r scaleResult) float64 {
			return r.busy.cpu - r.idle.cpu/r.idle.seconds*r.busy.seconds
		}), "%.0f"},
		{"propagation p50 ms", func(r scaleResult) float64 { return r.p50.Seconds() * 1000 }, "%.1f"},
		{"propagation p99 ms", func(r scaleResult) float64 { return r.p99.Seconds() * 1000 }, "%.1f"},
		{"**background** (idle window)", nil, ""},
		{"CPU µs /node/s", perSecond(func(r scaleResult) float64 { return r.idle.cpu }), "%.0f"},
		{"all streams B sent /node/s", perSecond(func(r scaleResult) float64 { return r.idle.streamTotal() }), "%.0f"},
		{"… of which GossipSub", perSecond(func(r scaleResult) float64 { return r.idle.streams[protoGossip] }), "%.0f"},
		{"… of which DHT", perSecond(func(r scaleResult) float64 { return r.idle.streams[protoDHT] }), "%.0f"},
		{"… of which PEX", perSecond(func(r scaleResult) float64 { return r.idle.streams[protoPEX] }), "%.0f"},
		{"connections opened /node/min", perSecond(func(r scaleResult) float64 { return r.idle.opened * 60 }), "%.1f"},
		{"**state per node** (end of run)", nil, ""},
		{"live heap KiB /node", func(r scaleResult) float64 { return r.heapKB }, "%.0f"},
		{"goroutine stacks KiB /node", func(r scaleResult) float64 { return r.stackKB }, "%.0f"},
		{"RSS KiB /node", func(r scaleResult) float64 { return r.rssKB }, "%.0f"},
		{"goroutines /node", func(r scaleResult) float64 { return r.goroutines }, "%.0f"},
		{"connections /node (mean)", func(r scaleResult) float64 { return r.conns }, "%.1f"},
		{"connections /node (max)", func(r scaleResult) float64 { return float64(r.connsMax) }, "%.0f"},
		{"peerstore entries /node", func(r scaleResult) float64 { return r.peersKnown }, "%.0f"},
		{"DHT routing table /node", func(r scaleResult) float64 { return r.routingTable }, "%.0f"},
		{"PEX descriptors held /node", func(r scaleResult) float64 { return r.pexKnown }, "%.0f"},
		{"GRAFT+PRUNE received /node (whole run)", func(r scaleResult) float64 { return r.churn }, "%.1f"},
		{"warm-up CPU ms /node", func(r scaleResult) float64 { return r.warmupCPU.Seconds() * 1000 }, "%.0f"},
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "workload: %d events on %d shards at %.0f/s, %d shards per node, connections %d-%d (grace %v), %d bootstrap peers, maintain %v\n\n",
		w.events, w.activeShards, w.rate, w.shardsPerNode, w.connLow, w.connHigh, w.connGrace, w.bootstrap, w.maintain)
	sb.WriteString("| nodes |")
	for _, r := range rs {
		fmt.Fprintf(&sb, " %d |", r.nodes)
	}
	for _, r := range rs[1:] {
		fmt.Fprintf(&sb, " %d/%d |", r.nodes, rs[0].nodes)
	}
	sb.WriteString("\n|---|")
	for range rs {
		sb.WriteString("---:|")
	}
	for range rs[1:] {
		sb.WriteString("---:|")
	}
	sb.WriteString("\n")
	for _, rw := range rows {
		fmt.Fprintf(&sb, "| %s |", rw.name)
		for _, r := range rs {
			if rw.f == nil {
				sb.WriteString(" |")
				continue
			}
			fmt.Fprintf(&sb, " "+rw.fmt+" |", rw.f(r))
		}
		for _, r := range rs[1:] {
			switch {
			case rw.f == nil:
				sb.WriteString(" |")
			case rw.f(rs[0]) == 0:
				sb.WriteString(" – |")
			default:
				fmt.Fprintf(&sb, " %.2f |", rw.f(r)/rw.f(rs[0]))
			}
		}
		sb.WriteString("\n")
	}
	sb.WriteString("\n| nodes | started in | warm-up | settled | idle cores | busy window | busy cores | max scheduling lag idle / busy | deliveries > 1 s | missing | load average after | mocknet link table |\n")
	sb.WriteString("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&sb, "| %d | %.0f s | %.0f s | %v | %.2f | %.0f s | %.2f | %v / %v | %d | %d | %s | %.0f MiB |\n",
			r.nodes, r.started.Seconds(), r.warmup.Seconds(), r.warmed, r.idle.cores, r.busy.seconds, r.busy.cores,
			r.idle.maxLag.Round(time.Millisecond), r.busy.maxLag.Round(time.Millisecond), r.late, r.missing, r.load, r.linkHeap)
	}
	return sb.String()
}

// TestScaleSmoke runs the scale run's harness at one small size with a
// short workload and checks what the benchmark relies on: every subscriber
// receives every event of its shards (runScale also checks that no node
// receives one of another shard), and the counters the figures come from
// move.
func TestScaleSmoke(t *testing.T) {
	w := scaleWorkload{
		activeShards:  4,
		shardsPerNode: 2,
		events:        8,
		rate:          20,
		connLow:       16,
		connHigh:      32,
		connGrace:     time.Second,
		bootstrap:     2,
		maintain:      time.Second,
		check:         2 * time.Second,
		idle:          time.Second,
		warmup:        time.Minute,
		drain:         30 * time.Second,
	}
	r := runScale(t, 24, w, t.Logf)
	t.Logf("\n%s", scaleTable(w, []scaleResult{r}))
	if !r.warmed {
		t.Fatal("the shard meshes did not connect their subscribers")
	}
	if r.missing != 0 {
		t.Fatalf("%d subscriber deliveries missing", r.missing)
	}
	// Each node subscribes to half the active shards, so it receives about
	// half the events (less the ones it published itself).
	if d := r.busy.delivered / float64(r.events); d <= 0.25 || d > 0.5 {
		t.Errorf("deliveries per node per event = %.3f, want about 0.5", d)
	}
	if r.busy.messages < r.busy.delivered {
		t.Errorf("messages received per node %.1f < deliveries %.1f", r.busy.messages, r.busy.delivered)
	}
	if r.busy.gossipSent <= 0 || r.busy.streams[protoGossip] < 0.9*r.busy.gossipSent || r.busy.cpu <= 0 {
		t.Errorf("GossipSub RPC bytes %.0f, GossipSub stream bytes %.0f (framing included, so about as many or more), CPU %.0f µs per node",
			r.busy.gossipSent, r.busy.streams[protoGossip], r.busy.cpu)
	}
	if r.conns <= 0 || r.routingTable <= 0 || r.pexKnown <= 0 {
		t.Errorf("connections %.1f, routing table %.1f, PEX table %.1f per node: discovery did not run", r.conns, r.routingTable, r.pexKnown)
	}
}
