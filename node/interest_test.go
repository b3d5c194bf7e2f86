package node

import (
	"slices"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
)

// TestClientInterest: a node that subscribes to nothing and holds no
// durability share joins an author's shard while one of its clients keeps a
// live subscription naming that author, receives that author's events
// published elsewhere, and leaves the shard once the subscription has ended
// and the linger has passed.
func TestClientInterest(t *testing.T) {
	_, parts := startParts(t, 2, func(i int, parts []*testPart) partSpec {
		s := testSpec()
		s.node.Mesh.OfferStorage = false
		s.node.Mesh.ClientLinger = setting.DurationOf(300 * time.Millisecond)
		if i > 0 {
			s.mesh.Bootstrap = []string{parts[0].p2pAddr()}
		}
		return s
	})
	a, b := parts[0], parts[1]
	k, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	shard := mesh.ShardOf(k.PubKey())
	if got := a.mp.m.Subscribed(); len(got) != 0 {
		t.Fatalf("before any client subscription the node is on shards %v", got)
	}

	release := a.rl.Interest([]nostr.Filter{{Authors: [][32]byte{k.PubKey()}}, {Kinds: []int{1}}})
	eventually(t, 10*time.Second, "the node joins the author's shard", func() bool {
		return slices.Equal(a.mp.m.Subscribed(), []int{shard})
	})
	// The publisher sends only once it has heard that the node is on the
	// shard, so publish until an event arrives; anti-entropy is off (the
	// node syncs no filters), so only GossipSub can carry it.
	var sent []*nostr.Event
	eventually(t, 15*time.Second, "an event reaches the subscribed client's node", func() bool {
		for _, ev := range sent {
			if a.holds(t, ev.ID) {
				return true
			}
		}
		if len(sent) == 0 || time.Since(time.Unix(sent[len(sent)-1].CreatedAt, 0)) >= time.Second {
			ev := note(t, k, "for a client of the other node "+time.Now().String())
			b.publish(t, ev)
			sent = append(sent, ev)
		}
		return false
	})

	if none := a.rl.Interest([]nostr.Filter{{Kinds: []int{1}}}); none != nil {
		t.Error("a subscription naming no authors was counted")
	}
	release()
	eventually(t, 10*time.Second, "the node leaves the shard after the linger", func() bool {
		return len(a.mp.m.Subscribed()) == 0
	})
}

// TestClientInterestBound: no more than client_shards shards are held for
// clients; further authors are left to lookups.
func TestClientInterestBound(t *testing.T) {
	ci := newClientInterest(nil, 2, time.Minute, nil)
	var authors [][32]byte
	seen := map[int]bool{}
	for len(authors) < 3 {
		k, err := nostr.GenerateSecretKey()
		if err != nil {
			t.Fatal(err)
		}
		if s := mesh.ShardOf(k.PubKey()); !seen[s] {
			seen[s] = true
			authors = append(authors, k.PubKey())
		}
	}
	rel := ci.hook([]nostr.Filter{{Authors: authors}})
	if got := ci.shards(time.Now()); len(got) != 2 {
		t.Fatalf("held %v, want 2 shards", got)
	}
	rel()
	if got := ci.shards(time.Now()); len(got) != 2 {
		t.Fatalf("right after release held %v, want the 2 shards to linger", got)
	}
	if got := ci.shards(time.Now().Add(2 * time.Minute)); len(got) != 0 {
		t.Fatalf("after the linger held %v, want none", got)
	}
}
