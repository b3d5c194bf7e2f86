package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/mesh"
)

// TestDurableStorage runs six storage nodes that subscribe to nothing but
// their durability share. An event a client publishes at a node that does
// not hold its shard ends up stored at exactly the shard's three holders,
// and the node it was published at hands it off to them and deletes it
// (meshsync's hand-off). Then one holder is cut off: events
// published meanwhile, at another node and at the cut-off holder itself,
// reach the other side through the durable anti-entropy once it is back.
func TestDurableStorage(t *testing.T) {
	const count = 6
	mn, parts, all := startStorageParts(t, count)
	agreeOn(t, parts, all)
	holders := holderIndexes(parts)

	// Published at node 0, on a shard node 0 does not hold.
	k := authorOn(t, func(s int) bool { return !slices.Contains(holders(s), 0) })
	shard := mesh.ShardOf(k.PubKey())
	ev := note(t, k, "held by three")
	parts[0].publish(t, ev)
	eventually(t, 30*time.Second, fmt.Sprintf("the event is stored at the holders %v", holders(shard)), func() bool {
		for _, h := range holders(shard) {
			if !parts[h].holds(t, ev.ID) {
				return false
			}
		}
		return true
	})
	// Waiting for the hand-off also lets the sessions it runs with the
	// holders end before one of them is cut off.
	eventually(t, 30*time.Second, "the node it was published at deletes it", func() bool { return !parts[0].holds(t, ev.ID) })
	for i, p := range parts {
		if !slices.Contains(holders(shard), i) && p.holds(t, ev.ID) {
			t.Fatalf("node %d stores an event of shard %d, which it does not hold", i, shard)
		}
	}

	// Cut one holder off from everyone.
	cut := holders(shard)[0]
	for i := range parts {
		if i != cut {
			if err := mn.UnlinkPeers(parts[cut].h.ID(), parts[i].h.ID()); err != nil {
				t.Fatal(err)
			}
			if err := mn.DisconnectPeers(parts[cut].h.ID(), parts[i].h.ID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	missed := note(t, k, "published while a holder was away")
	parts[0].publish(t, missed)
	alone := note(t, k, "published at the holder that was away")
	parts[cut].publish(t, alone)
	others := holders(shard)[1:]
	eventually(t, 30*time.Second, "the holders still linked store the event published meanwhile", func() bool {
		for _, h := range others {
			if !parts[h].holds(t, missed.ID) {
				return false
			}
		}
		return true
	})
	if parts[cut].holds(t, missed.ID) {
		t.Fatal("the cut-off holder received an event while cut off")
	}
	for i := range parts {
		if i != cut {
			if _, err := mn.LinkPeers(parts[cut].h.ID(), parts[i].h.ID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, 30*time.Second, "anti-entropy of the shard brings each side what it missed", func() bool {
		if !parts[cut].holds(t, missed.ID) {
			return false
		}
		for _, h := range others {
			if !parts[h].holds(t, alone.ID) {
				return false
			}
		}
		return true
	})
}

// TestStorageOffer checks which nodes offer storage in their descriptor.
func TestStorageOffer(t *testing.T) {
	cases := []struct {
		name  string
		class string
		offer bool
		want  bool
	}{
		{"home", config.ClassHome, true, true},
		{"anchor", config.ClassAnchor, true, true},
		{"leaf never", config.ClassLeaf, true, false},
		{"turned off", config.ClassHome, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Class, cfg.Mesh.OfferStorage = c.class, c.offer
			o := storageOffer(cfg)
			if (o != nil) != c.want {
				t.Fatalf("offer = %+v, want one: %v", o, c.want)
			}
			if o != nil && (o.MaxBytes != cfg.Mesh.StorageMaxBytes || o.RetentionSeconds != 2160*3600) {
				t.Fatalf("offer %+v does not carry the configured bounds", o)
			}
		})
	}
}
