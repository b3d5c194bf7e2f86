package mesh

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestDHTRecordsOnDisk checks that a mesh given a DHTDir keeps the
// provider records other nodes announce to it in that directory, not in
// memory: a record announced to a node is still there after the node
// restarts on the same directory, with the announcer gone. Without it,
// kad-dht keeps every record in a map for 48 hours, and a node's heap
// grows with every durably held event of the mesh.
func TestDHTRecordsOnDisk(t *testing.T) {
	cfg := Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, DHT: DHTServer, ConnLowWater: 4, ConnHighWater: 16,
		ResourceMaxMemory: 256 << 20, ResourceMaxFDs: 256, DisableAutoRelay: true, DisableTopicDiscovery: true}
	dir := filepath.Join(t.TempDir(), "dht")
	keyA := newKey(t)
	openA := func() *Mesh {
		c := cfg
		c.DHTDir = dir
		a, err := Open(keyA, c, Hooks{Sink: newRecordingSink()})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := openA()
	b, err := Open(newKey(t), cfg, Hooks{Sink: newRecordingSink()})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.h.Connect(ctx, peer.AddrInfo{ID: a.h.ID(), Addrs: a.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	var id [32]byte
	id[0] = 0xfe
	key := nostr.IDToCID(id).Hash()
	eventually(t, 20*time.Second, "b's announcement reached a", func() bool {
		if b.dht.RoutingTable().Find(a.h.ID()) == "" {
			return false
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		if err := b.dht.Provide(pctx, nostr.IDToCID(id), true); err != nil {
			return false
		}
		provs, err := a.dht.ProviderStore().GetProviders(ctx, key)
		return err == nil && hasPeer(provs, b.h.ID())
	})
	bID := b.h.ID()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if files, err := os.ReadDir(dir); err != nil || len(files) == 0 {
		t.Fatalf("nothing in %s (%v)", dir, err)
	}

	a = openA()
	defer a.Close()
	provs, err := a.dht.ProviderStore().GetProviders(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !hasPeer(provs, bID) {
		t.Fatalf("after a restart a lists providers %v, want %s: the record was not kept on disk", provs, bID)
	}
}

func hasPeer(ais []peer.AddrInfo, p peer.ID) bool {
	for _, ai := range ais {
		if ai.ID == p {
			return true
		}
	}
	return false
}
