package mesh

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
)

// recordingSink is a real Sink that keeps what it receives, by event id.
type recordingSink struct {
	mu   sync.Mutex
	got  map[[32]byte]*nostr.Event
	from map[[32]byte]peer.ID
	at   map[[32]byte]time.Time
}

func newRecordingSink() *recordingSink {
	return &recordingSink{got: map[[32]byte]*nostr.Event{}, from: map[[32]byte]peer.ID{}, at: map[[32]byte]time.Time{}}
}

func (s *recordingSink) Ingest(_ context.Context, ev *nostr.Event, from peer.ID) error {
	if err := ev.Verify(); err != nil {
		return fmt.Errorf("sink got an unverified event: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.got[ev.ID]; !ok {
		s.got[ev.ID] = ev
		s.from[ev.ID] = from
		s.at[ev.ID] = time.Now()
	}
	return nil
}

func (s *recordingSink) has(id [32]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.got[id]
	return ok
}

func (s *recordingSink) receivedAt(id [32]byte) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[id]
	return t, ok
}

// testNode is a mesh on a mocknet host with its key and sink.
type testNode struct {
	key  *identity.Key
	h    host.Host
	m    *Mesh
	sink *recordingSink
	addr ma.Multiaddr
}

// mockAddr gives node i a distinct address, as distinct machines have.
func mockAddr(t testing.TB, i int) ma.Multiaddr {
	t.Helper()
	a, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4001", (i>>16)&0xff, (i>>8)&0xff, i&0xff))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testConfig is a Config with short intervals for in-memory meshes.
func testConfig() Config {
	return Config{
		ListenAddrs:          []string{},
		DHT:                  DHTOff,
		MaintainInterval:     500 * time.Millisecond,
		AddrBookSaveInterval: 200 * time.Millisecond,
		DialTimeout:          5 * time.Second,
		RedialBackoff:        time.Second,
		PEXTimeout:           5 * time.Second,
	}
}

// addHost adds a mocknet host on key; its mesh is started by start, after
// the test has linked the hosts.
func addHost(t testing.TB, mn mocknet.Mocknet, key *identity.Key, addr ma.Multiaddr) *testNode {
	t.Helper()
	h, err := mn.AddPeer(key.Libp2pKey(), addr)
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{key: key, h: h, addr: addr, sink: newRecordingSink()}
}

// start starts n's mesh; a nil hooks.Sink means n's recording sink.
func (n *testNode) start(t testing.TB, cfg Config, hooks Hooks) {
	t.Helper()
	if hooks.Sink == nil {
		hooks.Sink = n.sink
	}
	m, err := New(n.h, cfg, hooks)
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
}

// closeMeshes stops every started mesh of nodes, all at once, so that no
// node spends the teardown redialling the ones already gone.
func closeMeshes(t testing.TB, nodes []*testNode) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n.m != nil {
			wg.Go(func() {
				if err := n.m.Close(); err != nil {
					t.Errorf("close mesh: %v", err)
				}
			})
		}
	}
	wg.Wait()
}

// newMockMesh makes count linked mocknet hosts and starts a mesh on each
// with cfgFor(i) and hooksFor(i). Nothing is connected yet: discovery does
// that.
func newMockMesh(t testing.TB, count int, cfgFor func(i int, nodes []*testNode) Config, hooksFor func(i int) Hooks) (mocknet.Mocknet, []*testNode) {
	t.Helper()
	tc := time.Now()
	mn := mocknet.New()
	nodes := make([]*testNode, count)
	for i := range nodes {
		nodes[i] = addHost(t, mn, newKey(t), mockAddr(t, i+1))
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	t.Logf("made and linked %d hosts in %v", count, time.Since(tc))
	t0 := time.Now()
	for i, n := range nodes {
		n.start(t, cfgFor(i, nodes), hooksFor(i))
	}
	t.Logf("started %d meshes in %v", count, time.Since(t0))
	t.Cleanup(func() {
		t0 := time.Now()
		closeMeshes(t, nodes)
		if err := mn.Close(); err != nil {
			t.Errorf("close mocknet: %v", err)
		}
		t.Logf("closed %d meshes in %v", count, time.Since(t0))
	})
	return mn, nodes
}

func newKey(t testing.TB) *identity.Key {
	t.Helper()
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// p2pAddr is n's address with its /p2p/ component, as an operator writes a
// bootstrap peer.
func (n *testNode) p2pAddr() string {
	return n.addr.String() + "/p2p/" + n.h.ID().String()
}

func (n *testNode) close(t testing.TB) {
	t.Helper()
	if err := n.m.Close(); err != nil {
		t.Errorf("close mesh: %v", err)
	}
	if err := n.h.Close(); err != nil {
		t.Errorf("close host: %v", err)
	}
}

// author is a Nostr key whose events land on a known shard.
type author struct {
	sk    nostr.SecretKey
	shard int
}

func newAuthor(t testing.TB) author {
	t.Helper()
	sk, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	return author{sk: sk, shard: ShardOf(sk.PubKey())}
}

// authorsOnDistinctShards returns n authors on n different shards.
func authorsOnDistinctShards(t testing.TB, n int) []author {
	t.Helper()
	seen := map[int]bool{}
	var out []author
	for len(out) < n {
		a := newAuthor(t)
		if !seen[a.shard] {
			seen[a.shard] = true
			out = append(out, a)
		}
	}
	return out
}

func (a author) event(t testing.TB, kind int, content string) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: kind, Tags: nostr.Tags{}, Content: content}
	if err := a.sk.Sign(ev); err != nil {
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
