package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestCheckpointWhileServing checkpoints a store while saves go on: every
// event acknowledged before the checkpoint is in the copy, which opens as
// a store of its own, and the original keeps serving.
func TestCheckpointWhileServing(t *testing.T) {
	fx := newFixture(t, 2)
	var before []*nostr.Event
	for i := range 50 {
		e := fx.event(i%2, 1, fx.now-int64(i), nil, fmt.Sprintf("before %d", i))
		if r := fx.save(e); r != Stored {
			t.Fatalf("save: %v", r)
		}
		before = append(before, e)
	}
	// Saves keep arriving while the checkpoint is taken.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			fx.s.Save(context.Background(), fx.event(i%2, 1, fx.now+int64(i), nil, fmt.Sprintf("during %d", i)))
		}
	}()
	dest := filepath.Join(t.TempDir(), "copy")
	err := fx.s.Checkpoint(dest)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.s.Checkpoint(dest); err == nil {
		t.Fatal("a second checkpoint over an existing directory was not refused")
	}

	cp, err := Open(dest, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	for _, e := range before {
		n := 0
		cp.Query(context.Background(), &nostr.Filter{IDs: [][32]byte{e.ID}}, 1, func(*nostr.Event) bool { n++; return true })
		if n != 1 {
			t.Fatalf("the checkpoint lacks %s (%s), acknowledged before it", e.IDHex(), e.Content)
		}
	}
	if got := len(fx.query(nostr.Filter{}, 10000)); got < len(before) {
		t.Fatalf("the original serves %d events after the checkpoint", got)
	}
}

// TestCheckpointDirKeepsTheFormat checkpoints a closed store of format 0
// (the committed fixture): the copy is not migrated, nor is the original,
// and the copy then opens, migrates and serves like the original.
func TestCheckpointDirKeepsTheFormat(t *testing.T) {
	if *writeFixture {
		t.Skip("the fixture is being rewritten")
	}
	src := t.TempDir()
	if err := os.CopyFS(src, os.DirFS(filepath.Join(format0Dir, "store"))); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "copy")
	if err := CheckpointDir(src, dest); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{src, dest} {
		db, err := pebble.Open(dir, &pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, found, err := readFormat(db)
		db.Close()
		if err != nil || found {
			t.Fatalf("%s has a format key after the checkpoint (%v): a checkpoint must not migrate", dir, err)
		}
	}
	want := len(readEvents(t, filepath.Join(format0Dir, "events.jsonl"))) - 2 // less the replaced and the deleted
	fx := newFixtureWith(t, 0, Options{}, dest)
	if got := len(fx.query(nostr.Filter{}, 1000)); got != want {
		t.Fatalf("the copy serves %d events, want %d", got, want)
	}
	if err := CheckpointDir(filepath.Join(t.TempDir(), "nothing"), filepath.Join(t.TempDir(), "x")); err == nil {
		t.Fatal("a checkpoint of a missing store was not refused")
	}
	// A store another process holds is refused by its lock; here the
	// fixture holds dest.
	if err := CheckpointDir(dest, filepath.Join(t.TempDir(), "y")); err == nil {
		t.Fatal("a checkpoint of a store in use was not refused")
	}
}
