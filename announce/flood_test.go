package announce

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
)

// flood publishes count descriptors to the relay at url over one
// connection, from authors announcement keys in turn, each of a fresh
// DID listing 64 addresses, created a second apart back from newest.
func flood(t *testing.T, url string, count, authors int, newest time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, closeConn, err := dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn()
	for i := range count {
		k, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for p := range 64 {
			addrs = append(addrs, fmt.Sprintf("/ip4/192.0.2.%d/tcp/%d/p2p/%s", i%250+1, 1000+p, k.PeerID()))
		}
		at := newest.Add(-time.Duration(i) * time.Second)
		ev, err := NewEvent(announceKey(t, byte(100+i%authors)), signed(t, k, 1, at, addrs...), at.Unix())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.send(nostr.ClientMessage{Type: nostr.MsgEvent, Event: ev}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := c.read()
			if err != nil {
				t.Fatal(err)
			}
			if m.Type == nostr.MsgOK && m.EventID == ev.ID {
				if !m.OK {
					t.Fatalf("flood event %d refused: %s", i, m.Text)
				}
				break
			}
		}
	}
}

// TestFindThroughFlood: a relay holds one honest descriptor and, newer,
// 1,000 from an attacker (ten announcement keys, 64 addresses each).
// Find still reads the honest one, Pick chooses it, and the dials are
// bounded: at most MaxDials nodes and MaxAddrs addresses each. A node
// known reachable is picked first whatever the flood.
func TestFindThroughFlood(t *testing.T) {
	url := testRelay(t)
	now := time.Now()
	honest := nodeKey(t, 1)
	addr := "/ip4/198.51.100.7/tcp/4001/p2p/" + honest.PeerID().String()
	ev, err := NewEvent(announceKey(t, 3), signed(t, honest, 1, now.Add(-time.Hour), addr), now.Add(-time.Hour).Unix())
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(context.Background(), url, ev); err != nil {
		t.Fatal(err)
	}
	flood(t, url, 1000, 10, now)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Find(ctx, url, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Descriptors) != 1001 {
		t.Fatalf("found %s, want the 1,001 descriptors (walking back past the flood)", f)
	}
	picked := f.Pick("")
	found := false
	for _, d := range picked {
		found = found || d.Descriptor.DID == honest.DID()
	}
	if !found || len(picked) != 11 {
		t.Fatalf("picked %d nodes, honest among them: %v; want the honest one and one per attacker key", len(picked), found)
	}
	if boot := f.Bootstrap(""); len(boot) > MaxDials*MaxAddrs {
		t.Fatalf("%d addresses to dial from one relay, want at most %d", len(boot), MaxDials*MaxAddrs)
	}
	// With the honest node known reachable, it is asked for by name and
	// dialled first.
	f, err = Find(ctx, url, time.Now(), honest.DID())
	if err != nil {
		t.Fatal(err)
	}
	if p := f.Pick(""); len(p) == 0 || p[0].Descriptor.DID != honest.DID() {
		t.Fatal("the known node is not picked first")
	}
}
