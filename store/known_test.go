package store

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

func testID(i int) [32]byte {
	return sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
}

// TestKnownIDsGrow adds ids across several stages and a merge: none is
// ever forgotten, and ids never added are mostly answered "no".
func TestKnownIDsGrow(t *testing.T) {
	const n = 5 * knownFirstStage
	loaded, k := newKnownIDs(), newKnownIDs()
	for i := range n {
		id := testID(i)
		if i%3 == 0 {
			loaded.add(&id)
		} else {
			k.add(&id)
		}
	}
	k.merge(loaded)
	if len(k.stages) < 3 {
		t.Fatalf("%d stages after %d ids, want the filter to have grown", len(k.stages), n)
	}
	for i := range n {
		if id := testID(i); !k.mayHave(&id) {
			t.Fatalf("id %d was added but mayHave says no", i)
		}
	}
	fp := 0
	const probes = 100_000
	for i := range probes {
		if id := testID(n + i); k.mayHave(&id) {
			fp++
		}
	}
	// Each stage is sized for 0.5 %; the stages' rates add up.
	if limit := float64(len(k.stages)) * knownFalsePositive * 2 * probes; float64(fp) > limit {
		t.Fatalf("%d false positives in %d probes over %d stages, want at most %.0f", fp, probes, len(k.stages), limit)
	}
}

// TestKnownIDsAfterRestart checks that with the id filter loaded from disk
// a store still refuses what it has (Duplicate) and what was deleted
// (Deleted), and takes what is new.
func TestKnownIDsAfterRestart(t *testing.T) {
	fx := newFixture(t, 2)
	kept := fx.event(0, 1, fx.now, nil, "kept")
	gone := fx.event(0, 1, fx.now, nil, "deleted after saving")
	never := fx.event(0, 1, fx.now, nil, "deleted before it arrived")
	for _, e := range []*nostr.Event{kept, gone} {
		if r := fx.save(e); r != Stored {
			t.Fatalf("first save = %v", r)
		}
	}
	del := fx.event(0, nostr.KindDeletion, fx.now+1, nostr.Tags{{"e", gone.IDHex()}, {"e", never.IDHex()}}, "")
	if r := fx.save(del); r != Stored {
		t.Fatalf("deletion = %v", r)
	}
	fx.restart()
	<-fx.s.knownLoaded
	fresh := fx.event(1, 1, fx.now, nil, "new after restart")
	for _, c := range []struct {
		name string
		ev   *nostr.Event
		want Result
	}{
		{"stored before restart", kept, Duplicate},
		{"deletion request itself", del, Duplicate},
		{"deleted after saving", gone, Deleted},
		{"deleted before it arrived", never, Deleted},
		{"new", fresh, Stored},
		{"new, again", fresh, Duplicate},
	} {
		if r := fx.save(c.ev); r != c.want {
			t.Errorf("%s: save = %v, want %v", c.name, r, c.want)
		}
	}
}
