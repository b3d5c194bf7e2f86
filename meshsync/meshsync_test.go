package meshsync

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// local is a node's store and relay as Local: queries go to the store,
// additions through the relay (verify, store, deliver).
type local struct {
	*store.Store
	r *relay.Relay
}

func (l local) AddEvent(ctx context.Context, ev *nostr.Event) (store.Result, error) {
	return l.r.AddEvent(ctx, ev, relay.FromMesh)
}

type testNode struct {
	svc   *Service
	local local
	pol   *boundary.Policy
}

func newMesh(t *testing.T, n int) (mocknet.Mocknet, []*testNode) {
	t.Helper()
	// Ed25519 keys, as fleetmesh nodes have: placement needs them.
	mn := mocknet.New()
	t.Cleanup(func() { mn.Close() })
	for i := range n {
		key, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mn.AddPeer(key.Libp2pKey(), ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	var nodes []*testNode
	for _, h := range mn.Hosts() {
		st, err := store.Open(t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		pol, err := boundary.New(nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := local{Store: st, r: relay.New(relay.DefaultConfig(), st, nil, nil)}
		nodes = append(nodes, &testNode{svc: New(h, l, pol, Config{}, nil), local: l, pol: pol})
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}
	return mn, nodes
}

func (n *testNode) ids(t *testing.T) map[[32]byte]bool {
	t.Helper()
	out := map[[32]byte]bool{}
	if err := n.local.Query(context.Background(), &nostr.Filter{}, 1<<20, func(ev *nostr.Event) bool {
		out[ev.ID] = true
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func (n *testNode) add(t *testing.T, ev *nostr.Event) {
	t.Helper()
	if _, err := n.local.AddEvent(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

func signed(t *testing.T, k nostr.SecretKey, ts int64, kind int, content string, tags ...[]string) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{CreatedAt: ts, Kind: kind, Tags: append(nostr.Tags{}, tags...), Content: content}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestPartitionHeals gives ten nodes different parts of a set of events,
// as if they had been apart, and checks that sync rounds over a ring make
// every node hold the whole set.
func TestPartitionHeals(t *testing.T) {
	mn, nodes := newMesh(t, 10)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]nostr.SecretKey, 5)
	for i := range keys {
		keys[i], _ = nostr.GenerateSecretKey()
	}
	all := map[[32]byte]bool{}
	for i := range 300 {
		ev := signed(t, keys[r.IntN(5)], 1_700_000_000+int64(r.IntN(1000)), 1, fmt.Sprint("note ", i))
		all[ev.ID] = true
		nodes[r.IntN(len(nodes))].add(t, ev)
	}
	peers := mn.Peers()
	ctx := context.Background()
	// Two passes around the ring carry every event everywhere.
	for pass := range 2 {
		for i, n := range nodes {
			next := peers[(i+1)%len(peers)]
			if _, err := n.svc.SyncWith(ctx, next, nostr.Filter{}); err != nil {
				t.Fatalf("pass %d node %d: %v", pass, i, err)
			}
		}
	}
	for i, n := range nodes {
		if got := n.ids(t); len(got) != len(all) {
			t.Fatalf("node %d holds %d of %d events", i, len(got), len(all))
		}
	}
}

func TestDeletionsAndReplacementsConverge(t *testing.T) {
	mn, nodes := newMesh(t, 2)
	a, b := nodes[0], nodes[1]
	k, _ := nostr.GenerateSecretKey()
	note := signed(t, k, 100, 1, "to delete")
	v1 := signed(t, k, 100, 0, `{"name":"v1"}`)
	v2 := signed(t, k, 200, 0, `{"name":"v2"}`)
	del := signed(t, k, 300, 5, "", []string{"e", note.IDHex()})
	a.add(t, note)
	a.add(t, v1)
	b.add(t, v2)
	b.add(t, del)
	st, err := a.svc.SyncWith(context.Background(), mn.Peers()[1], nostr.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*testNode{"a": a, "b": b} {
		ids := n.ids(t)
		if ids[note.ID] || ids[v1.ID] || !ids[v2.ID] || !ids[del.ID] || len(ids) != 2 {
			t.Fatalf("node %s after sync (%+v): note=%v v1=%v v2=%v del=%v total=%d", name, st, ids[note.ID], ids[v1.ID], ids[v2.ID], ids[del.ID], len(ids))
		}
	}
	// a fetched the two it lacked: its catch-up is over and counted them (and what it pushed).
	if p := a.svc.Progress(); p.Active || p.Pending != 0 || p.Moved != int64(st.Need+st.Have) || st.Need != 2 {
		t.Fatalf("a's progress after the sync: %+v (session %+v)", p, st)
	}
}

// TestBoundaryOnReplication checks that nothing the boundary forbids is
// offered, fetched or pushed, even when a store holds it.
func TestBoundaryOnReplication(t *testing.T) {
	mn, nodes := newMesh(t, 2)
	a, b := nodes[0], nodes[1]
	k, _ := nostr.GenerateSecretKey()
	ok1 := signed(t, k, 100, 1, "fine")
	// Stored by going around the relay, as a store with older data might.
	forbidden := signed(t, k, 101, 1, "nsec1"+strings.Repeat("q", 58))
	a.add(t, ok1)
	if _, err := a.local.Store.Save(context.Background(), forbidden); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.SyncWith(context.Background(), mn.Peers()[0], nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	ids := b.ids(t)
	if !ids[ok1.ID] || ids[forbidden.ID] {
		t.Fatalf("b holds ok=%v forbidden=%v", ids[ok1.ID], ids[forbidden.ID])
	}
	if _, err := a.svc.SyncWith(context.Background(), mn.Peers()[1], nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	if b.ids(t)[forbidden.ID] {
		t.Fatal("forbidden event pushed")
	}
}

func TestLookup(t *testing.T) {
	mn, nodes := newMesh(t, 3)
	k, _ := nostr.GenerateSecretKey()
	other, _ := nostr.GenerateSecretKey()
	held := signed(t, k, 100, 1, "only at node 2")
	alsoHeld := signed(t, k, 101, 1, "at node 1 and 2")
	notMatching := signed(t, other, 102, 1, "someone else")
	nodes[2].add(t, held)
	nodes[2].add(t, alsoHeld)
	nodes[1].add(t, alsoHeld)
	nodes[1].add(t, notMatching)
	var got []*nostr.Event
	nodes[0].svc.Lookup(context.Background(), mn.Peers()[1:], nostr.Filter{Authors: [][32]byte{k.PubKey()}}, 10, func(ev *nostr.Event) {
		got = append(got, ev)
	})
	if len(got) != 2 {
		t.Fatalf("lookup by author found %d events, want 2 (deduplicated)", len(got))
	}
	got = nil
	nodes[0].svc.Lookup(context.Background(), mn.Peers()[1:], nostr.Filter{IDs: [][32]byte{held.ID}}, 1, func(ev *nostr.Event) {
		got = append(got, ev)
	})
	if len(got) != 1 || got[0].ID != held.ID {
		t.Fatalf("lookup by id: %d events", len(got))
	}
}

// TestSyncShards gives two nodes events of authors on three shards and
// checks that a session restricted to two of them moves exactly those
// shards' events, both ways, and leaves the third alone.
func TestSyncShards(t *testing.T) {
	mn, nodes := newMesh(t, 2)
	a, b := nodes[0], nodes[1]
	keys := map[int]nostr.SecretKey{}
	for len(keys) < 3 {
		k, _ := nostr.GenerateSecretKey()
		keys[mesh.ShardOf(k.PubKey())] = k
	}
	var shards []int
	for s := range keys {
		shards = append(shards, s)
	}
	synced, left := shards[:2], shards[2]
	want := map[[32]byte]bool{}
	other := map[[32]byte]bool{}
	for i := range 30 {
		s := shards[i%3]
		ev := signed(t, keys[s], 1_700_000_000+int64(i), 1, fmt.Sprint("note ", i))
		if i%2 == 0 {
			a.add(t, ev)
		} else {
			b.add(t, ev)
		}
		if s == left {
			other[ev.ID] = true
		} else {
			want[ev.ID] = true
		}
	}
	st, err := a.svc.SyncShards(context.Background(), mn.Peers()[1], synced)
	if err != nil {
		t.Fatal(err)
	}
	// Each event starts on one side only, so every one of the synced
	// shards is a difference and none of the other shard's is.
	if st.Need+st.Have != len(want) {
		t.Fatalf("reconciled %d differences (%+v), want the %d events of the synced shards", st.Need+st.Have, st, len(want))
	}
	for name, n := range map[string]*testNode{"a": a, "b": b} {
		ids := n.ids(t)
		for id := range want {
			if !ids[id] {
				t.Fatalf("node %s lacks an event of a synced shard", name)
			}
		}
		moved := 0
		for id := range other {
			if ids[id] {
				moved++
			}
		}
		if moved != len(other)/2 {
			t.Fatalf("node %s holds %d events of the shard left out, want its own %d", name, moved, len(other)/2)
		}
	}
	if _, err := a.svc.SyncShards(context.Background(), mn.Peers()[1], []int{1, 1}); err == nil {
		t.Fatal("a repeated shard was accepted")
	}
}

// TestShardOptionRefused checks that a responder refuses malformed shard
// options with NEG-ERR rather than reconciling some other set.
func TestShardOptionRefused(t *testing.T) {
	cases := []struct {
		name string
		raw  string
	}{
		{"out of range", `{"shards":[256]}`},
		{"negative", `{"shards":[-1]}`},
		{"repeated", `{"shards":[3,3]}`},
		{"empty", `{"shards":[]}`},
		{"missing", `{}`},
		{"unknown member", `{"shards":[1],"kinds":[1]}`},
		{"not an object", `[1,2]`},
		{"trailing data", `{"shards":[1]} {}`},
		{"hand-off not a boolean", `{"shards":[1],"handoff":1}`},
		{"hand-off without shards", `{"handoff":true}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := parseOpenOptions(json.RawMessage(c.raw)); err == nil || !strings.HasPrefix(err.Error(), "invalid: ") {
				t.Fatalf("parseOpenOptions(%s) = %v, want an invalid: error", c.raw, err)
			}
		})
	}
	set, o, err := parseOpenOptions(json.RawMessage(`{"shards":[0,255,17]}`))
	if err != nil || o.HandOff {
		t.Fatal(err, o)
	}
	if _, o, err := parseOpenOptions(json.RawMessage(`{"shards":[4],"handoff":true}`)); err != nil || !o.HandOff {
		t.Fatalf("a hand-off's options: %+v %v", o, err)
	}
	for s := range mesh.ShardCount {
		if set[s] != (s == 0 || s == 255 || s == 17) {
			t.Fatalf("shard %d: in set = %v", s, set[s])
		}
	}
}

// FuzzParseOpenOptions feeds NEG-OPEN options: the parser must never
// panic, and what it accepts is a set of 1 to 256 shards in range that
// round-trips.
func FuzzParseOpenOptions(f *testing.F) {
	for _, s := range []string{`{"shards":[0]}`, `{"shards":[0,1,255]}`, `{"shards":[256]}`, `{}`, `null`, `{"shards":null}`, `{"shards":[1.5]}`, `{"shards":[1],"x":1}`, `{"shards":[2],"handoff":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		set, o, err := parseOpenOptions(raw)
		if err != nil {
			return
		}
		if o.HandOff && len(o.Shards) == 0 {
			t.Fatalf("accepted %q as a hand-off of no shard", raw)
		}
		var shards []int
		for s, in := range set {
			if in {
				shards = append(shards, s)
			}
		}
		if len(shards) == 0 {
			t.Fatalf("accepted %q as an empty set", raw)
		}
		again, err := newShardSet(shards)
		if err != nil || *again != *set {
			t.Fatalf("accepted %q, which does not round-trip: %v", raw, err)
		}
	})
}
