package leaf

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMsgIDsTrimmed: the DIDComm ids of picked-up messages are kept to
// the newest msgIDs (spec/leaf.md: the newest 100,000), the newest still
// dropping a redelivery, and ids kept by a file from before the trim are
// trimmed too once it is reopened.
func TestMsgIDsTrimmed(t *testing.T) {
	dir := t.TempDir()
	d, err := openDB(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.msgIDs != maxMsgIDs || maxMsgIDs != 100_000 {
		t.Fatalf("the id set is bounded at %d, spec/leaf.md says 100,000", d.msgIDs)
	}
	const bound = 50
	d.msgIDs = bound
	batch := func(from, n int) []message {
		var ms []message
		for i := from; i < from+n; i++ {
			ms = append(ms, message{DeliveryID: fmt.Sprintf("d%d", i), From: "did:key:x", ID: fmt.Sprintf("m%d", i)})
		}
		return ms
	}
	for i := 0; i < 4*bound; i += 10 {
		if _, err := d.putMessages(batch(i, 10), "did:key:home", 10, time.Unix(1_800_000_000, 0)); err != nil {
			t.Fatal(err)
		}
	}
	ids := func() int {
		n := 0
		d.bolt.View(func(tx *bolt.Tx) error {
			n = tx.Bucket(bMsgIDs).Stats().KeyN
			return nil
		})
		return n
	}
	if n := ids(); n != bound {
		t.Fatalf("%d message ids kept, want %d", n, bound)
	}
	// The newest id still drops the same message forwarded again under
	// a new delivery id.
	again := batch(4*bound-1, 1)
	again[0].DeliveryID = "fresh"
	if added, err := d.putMessages(again, "did:key:home", 10, time.Unix(1_800_000_000, 0)); err != nil || added != 0 {
		t.Fatalf("a redelivery of the newest message: added %d, %v", added, err)
	}
	// A file from before the trim: its ids have no order.
	d.bolt.Update(func(tx *bolt.Tx) error {
		for i := range 3 * bound {
			tx.Bucket(bMsgIDs).Put(fmt.Appendf(nil, "did:key:y old%d", i), u64key(uint64(10_000+i)))
		}
		return tx.DeleteBucket(bMsgIDOrder)
	})
	d.close()
	if d, err = openDB(dir); err != nil {
		t.Fatal(err)
	}
	defer d.close()
	d.msgIDs = bound
	if _, err := d.putMessages(batch(10_000, 1), "did:key:home", 10, time.Unix(1_800_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	if n := ids(); n != bound {
		t.Fatalf("after reopening a file of untrimmed ids: %d kept, want %d", n, bound)
	}
}
