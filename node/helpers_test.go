package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// testPart is a node's mesh side on a mocknet host, wired to a real store
// and relay exactly as openMesh wires them; only the host is in memory.
type testPart struct {
	opts Options
	h    host.Host
	addr ma.Multiaddr
	st   *store.Store
	rl   *relay.Relay
	mp   *meshPart
}

// partSpec says how to start one test node: its mesh and node config,
// and optionally its relay's config (nil: relay.DefaultConfig) and the
// meter its sync service counts into (nil: none; the mesh's is
// mesh.GossipTracer).
type partSpec struct {
	mesh  mesh.Config
	node  config.Config
	relay *relay.Config
	meter *meter.Meter
	// hold, if set, makes the node refuse an event from the mesh while
	// it returns true (sync: the event came by meshsync, else by
	// GossipSub): a peer that has not applied a write yet (reads_test.go).
	hold func(ev *nostr.Event, sync bool) bool
	// hooks, if set, adds the relay's hooks before the mesh is wired.
	hooks func(rl *relay.Relay)
	// lookupGrace, if set, is the sync service's Config.LookupGrace.
	lookupGrace time.Duration
}

// heldLocal is a meshLocal that refuses, while hold says so, the events
// the mesh hands it.
type heldLocal struct {
	meshLocal
	hold func(ev *nostr.Event, sync bool) bool
}

// errHeld is heldLocal's refusal.
var errHeld = fmt.Errorf("node test: held back")

func (l heldLocal) AddEvent(ctx context.Context, ev *nostr.Event) (store.Result, error) {
	if l.hold(ev, true) {
		return 0, errHeld
	}
	return l.meshLocal.AddEvent(ctx, ev)
}

func (l heldLocal) Ingest(ctx context.Context, ev *nostr.Event, from peer.ID) error {
	if l.hold(ev, false) {
		return errHeld
	}
	return l.meshLocal.Ingest(ctx, ev, from)
}

// partLocal is the node's store and relay as the mesh and meshsync take
// them.
type partLocal interface {
	meshsync.Local
	mesh.Sink
}

// testSpec is a node that subscribes to nothing but its durability share,
// with short intervals, R = 3, and a storage offer.
func testSpec() partSpec {
	n := config.Default()
	n.Mesh.Subscribe = nil
	return partSpec{
		mesh: mesh.Config{
			ListenAddrs:          []string{},
			DHT:                  mesh.DHTOff,
			MaintainInterval:     300 * time.Millisecond,
			AddrBookSaveInterval: time.Minute,
			DialTimeout:          5 * time.Second,
			RedialBackoff:        500 * time.Millisecond,
			PEXTimeout:           5 * time.Second,
			Durability:           mesh.DurabilityConfig{Replication: 3, PlacementDebounce: 500 * time.Millisecond, ProvideInterval: 50 * time.Millisecond},
		},
		node: n,
	}
}

// startParts makes count linked mocknet hosts and starts a mesh part on
// each with specFor(i, parts), where parts[j] for j < i are started.
func startParts(t testing.TB, count int, specFor func(i int, parts []*testPart) partSpec) (mocknet.Mocknet, []*testPart) {
	t.Helper()
	mn := mocknet.New()
	parts := make([]*testPart, count)
	for i := range parts {
		key, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		addr, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/10.0.%d.%d/tcp/4001", i>>8, i&0xff+1))
		if err != nil {
			t.Fatal(err)
		}
		h, err := mn.AddPeer(key.Libp2pKey(), addr)
		if err != nil {
			t.Fatal(err)
		}
		parts[i] = &testPart{opts: Options{Key: key, Log: slog.New(slog.DiscardHandler)}, h: h, addr: addr}
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, p := range parts {
			if p.mp != nil {
				wg.Go(func() { p.close(t) })
			}
		}
		wg.Wait()
		mn.Close()
	})
	for i, p := range parts {
		p.start(t, specFor(i, parts))
	}
	return mn, parts
}

// startStorageParts starts count parts of testSpec, each after the first
// bootstrapping from the first, and returns them with their PeerIDs.
func startStorageParts(t *testing.T, count int) (mocknet.Mocknet, []*testPart, []peer.ID) {
	t.Helper()
	mn, parts := startParts(t, count, func(i int, parts []*testPart) partSpec {
		s := testSpec()
		if i > 0 {
			s.mesh.Bootstrap = []string{parts[0].p2pAddr()}
		}
		return s
	})
	ids := make([]peer.ID, len(parts))
	for i, p := range parts {
		ids[i] = p.h.ID()
	}
	return mn, parts, ids
}

func (p *testPart) start(t testing.TB, spec partSpec) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := boundary.New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcfg := relay.DefaultConfig()
	if spec.relay != nil {
		rcfg = *spec.relay
	}
	rl := relay.New(rcfg, st, nil, nil)
	if spec.hooks != nil {
		spec.hooks(rl)
	}
	var local partLocal = meshLocal{EventStore: st, r: rl}
	if spec.hold != nil {
		local = heldLocal{meshLocal{EventStore: st, r: rl}, spec.hold}
	}
	m, err := mesh.New(p.h, spec.mesh, mesh.Hooks{
		Sink:             local,
		VerifyDescriptor: peerexchange.VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{})),
	})
	if err != nil {
		t.Fatal(err)
	}
	mc := spec.node.Mesh
	p.opts.Config = spec.node
	p.st, p.rl = st, rl
	svc := meshsync.New(p.h, local, pol, meshsync.Config{Meter: spec.meter, LookupGrace: spec.lookupGrace}, nil)
	sc, err := mc.SyncScheduler()
	if err != nil {
		t.Fatal(err)
	}
	sc.Every = 300 * time.Millisecond
	self := newSelfDescriptor(p.opts)
	self.m = m
	p.mp = &meshPart{
		m:      m,
		sync:   svc,
		rounds: meshsync.NewScheduler(svc, m, sc, p.opts.Log),
		self:   self,
	}
	if mc.ClientShards > 0 {
		p.mp.interest = newClientInterest(m, mc.ClientShards, mc.ClientLinger.Duration, p.opts.Log)
	}
	p.mp.wire(rl, p.opts.Log)
	p.mp.start("ws://127.0.0.1:7447")
}

func (p *testPart) close(t testing.TB) {
	if err := p.mp.close(); err != nil {
		t.Errorf("close mesh part: %v", err)
	}
	if err := p.st.Close(); err != nil {
		t.Errorf("close store: %v", err)
	}
}

// p2pAddr is p's address as a bootstrap peer is written.
func (p *testPart) p2pAddr() string { return p.addr.String() + "/p2p/" + p.h.ID().String() }

// holds reports whether p's store holds the event id.
func (p *testPart) holds(t testing.TB, id [32]byte) bool {
	t.Helper()
	found := false
	if err := p.st.Query(context.Background(), &nostr.Filter{IDs: [][32]byte{id}}, 1, func(*nostr.Event) bool {
		found = true
		return false
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// publish stores ev at p as a client's event, which publishes it.
func (p *testPart) publish(t testing.TB, ev *nostr.Event) {
	t.Helper()
	if res, err := p.rl.AddEvent(context.Background(), ev, relay.FromClient); err != nil || res != store.Stored {
		t.Fatalf("add event: %v %v", res, err)
	}
}

// agreeOn waits until every part places over exactly the storage nodes
// want and holds its shards.
func agreeOn(t testing.TB, parts []*testPart, want []peer.ID) {
	t.Helper()
	want = slices.Clone(want)
	slices.Sort(want)
	deadline := time.Now().Add(60 * time.Second)
	for {
		lag := -1
		for i, p := range parts {
			pl := p.mp.m.Placement()
			if !slices.Equal(pl.Nodes(), want) || !slices.Equal(p.mp.m.Durable(), pl.Shards(p.h.ID())) {
				lag = i
				break
			}
		}
		if lag < 0 {
			return
		}
		if time.Now().After(deadline) {
			p := parts[lag]
			st := p.mp.m.Stats()
			t.Fatalf("not within 60s: every node places over the %d storage nodes; node %d places over %d, has %d connections, accepted %d descriptors and rejected %d",
				len(want), lag, len(p.mp.m.Placement().Nodes()), len(p.h.Network().Peers()), st.DescriptorsAccepted, st.DescriptorsRejected)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holderIndexes returns a function giving the indexes in parts of the
// holders of a shard, by the placement node 0 computed.
func holderIndexes(parts []*testPart) func(shard int) []int {
	idx := map[peer.ID]int{}
	for i, p := range parts {
		idx[p.h.ID()] = i
	}
	pl := parts[0].mp.m.Placement()
	return func(shard int) []int {
		var out []int
		for _, p := range pl.Holders(shard) {
			out = append(out, idx[p])
		}
		return out
	}
}

// authorOn returns a Nostr key whose shard satisfies ok.
func authorOn(t *testing.T, ok func(shard int) bool) nostr.SecretKey {
	t.Helper()
	for range 100_000 {
		k, err := nostr.GenerateSecretKey()
		if err != nil {
			t.Fatal(err)
		}
		if ok(mesh.ShardOf(k.PubKey())) {
			return k
		}
	}
	t.Fatal("no author found on a wanted shard")
	return nostr.SecretKey{}
}

func note(t testing.TB, k nostr.SecretKey, content string) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: 1, Tags: nostr.Tags{}, Content: content}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveNode opens and serves a whole node (Open, Serve) in a fresh home,
// its relay on a free loopback port and its mesh alone (a loopback
// listener, no bootstrap, DHT or mDNS), after edit changes its config.
// stop stops it, at most once; the test's cleanup calls it too.
func serveNode(t testing.TB, level slog.Level, edit func(*config.Config)) (n *Node, key *identity.Key, stop func()) {
	t.Helper()
	h := Home{Dir: t.TempDir()}
	key, _, err := Init(h, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(h.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Relay.Listen = "127.0.0.1:0"
	cfg.Mesh.Listen, cfg.Mesh.Bootstrap, cfg.Mesh.MDNS, cfg.Mesh.DHT = []string{"/ip4/127.0.0.1/tcp/0"}, nil, setting.Off, "off"
	edit(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{}, 1)
	n, err = Open(Options{Home: h, Config: cfg, Key: key, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		Ready: func(string) { ready <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	<-ready
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return n, key, stop
}
