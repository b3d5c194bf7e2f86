package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"fleetmesh.org/fleetmesh/nostr"
)

var writeFixture = flag.Bool("write-format0-fixture", false, "rewrite testdata/format0 (a store as builds before the format key wrote it)")

// format0Dir is a store written before stores recorded their format, with
// the events saved into it in events.jsonl. It is committed, so that a
// change to the key layout or the record encoding that forgets to raise
// Format and add a migration fails TestOpensFormat0.
const format0Dir = "testdata/format0"

// TestWriteFormat0Fixture rewrites the fixture when asked to with
// -write-format0-fixture: events of every kind class, a replaced
// replaceable event and a NIP-09 deletion, saved, then the format key
// removed, which is what a store of format 0 is.
func TestWriteFormat0Fixture(t *testing.T) {
	if !*writeFixture {
		t.Skip("only with -write-format0-fixture")
	}
	dir := filepath.Join(format0Dir, "store")
	if err := os.RemoveAll(format0Dir); err != nil {
		t.Fatal(err)
	}
	fx := newFixtureWith(t, 3, Options{}, dir)
	var saved []*nostr.Event
	add := func(e *nostr.Event) {
		if r := fx.save(e); r == Stored {
			saved = append(saved, e)
		}
	}
	for i := range 20 {
		add(fx.event(i%3, 1, fx.now-int64(100*i), nostr.Tags{{"t", "fixture"}}, "note"))
	}
	old := fx.event(0, 0, fx.now-50, nil, `{"name":"old"}`)
	add(old)
	add(fx.event(0, 0, fx.now-10, nil, `{"name":"new"}`))
	add(fx.event(1, 30023, fx.now, nostr.Tags{{"d", "post"}}, "article"))
	doomed := fx.event(2, 1, fx.now-5, nil, "to be deleted")
	add(doomed)
	add(fx.event(2, 5, fx.now, nostr.Tags{{"e", doomed.IDHex()}}, ""))
	if err := fx.s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(formatKey, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(format0Dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, e := range saved {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(append(b, '\n'))
	}
	t.Log("rewrote", format0Dir)
}

// TestOpensFormat0 opens a copy of a format-0 store: it migrates to
// Format, and every event in it reads as it was saved, by id and by
// filter, with the replaced and the deleted events still gone.
func TestOpensFormat0(t *testing.T) {
	if *writeFixture {
		t.Skip("the fixture is being rewritten")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(format0Dir, "store"))); err != nil {
		t.Fatal(err)
	}
	want := readEvents(t, filepath.Join(format0Dir, "events.jsonl"))
	fx := newFixtureWith(t, 0, Options{}, dir)
	if got := fx.format(); got != Format {
		t.Fatalf("format after opening a format-0 store: %d, want %d", got, Format)
	}
	got := fx.query(nostr.Filter{}, 1000)
	var wantIDs, gotIDs []string
	for _, e := range want {
		wantIDs = append(wantIDs, e.IDHex())
	}
	for _, e := range got {
		gotIDs = append(gotIDs, e.IDHex())
	}
	slices.Sort(wantIDs)
	slices.Sort(gotIDs)
	// The saved list holds the replaced profile and the deleted note; the
	// store must not: they were superseded and deleted before it closed.
	if len(gotIDs) != len(wantIDs)-2 {
		t.Fatalf("the migrated store holds %d events, want %d (the %d saved less the replaced and the deleted one)", len(gotIDs), len(wantIDs)-2, len(wantIDs))
	}
	for _, id := range gotIDs {
		if _, found := slices.BinarySearch(wantIDs, id); !found {
			t.Fatalf("the migrated store holds %s, which was never saved", id)
		}
	}
	if n := len(fx.query(nostr.Filter{Kinds: []int{0}}, 10)); n != 1 {
		t.Fatalf("%d kind-0 events for one author, want the one current", n)
	}
	if got := fx.query(nostr.Filter{Tags: map[string][]string{"t": {"fixture"}}}, 100); len(got) != 20 {
		t.Fatalf("the tag index finds %d of 20 notes", len(got))
	}
	// A re-open finds the format recorded and runs no migration.
	fx.restart()
	if got := fx.format(); got != Format {
		t.Fatalf("format after a re-open: %d", got)
	}
	// Saving into the migrated store works, and the new event reads back.
	k, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	fx.keys = append(fx.keys, k)
	e := fx.event(0, 1, fx.now, nil, "after the migration")
	if r := fx.save(e); r != Stored {
		t.Fatalf("save after the migration: %v", r)
	}
	// The deleted note stays deleted: its tombstone was carried over, and
	// a stranger's deletion request naming it now does not lift it.
	var del *nostr.Event
	for _, e := range want {
		if e.Kind == nostr.KindDeletion {
			del = e
		}
	}
	if del == nil || len(del.Tags) != 1 {
		t.Fatalf("the fixture's deletion request: %v", del)
	}
	var doomed *nostr.Event
	for _, e := range want {
		if e.IDHex() == del.Tags[0][1] {
			doomed = e
		}
	}
	if doomed == nil {
		t.Fatal("the fixture does not list the note its deletion request names")
	}
	if r := fx.save(doomed); r != Deleted {
		t.Fatalf("the deleted note re-offered after the migration: %v", r)
	}
	if r := fx.save(fx.event(0, 5, fx.now, nostr.Tags{{"e", doomed.IDHex()}}, "")); r != Stored {
		t.Fatalf("a stranger's deletion request: %v", r)
	}
	fx.restart()
	if r := fx.save(doomed); r != Deleted {
		t.Fatalf("the deleted note re-offered after a stranger's deletion request: %v", r)
	}
}

// TestSplitTombstones: the migration to format 3 rewrites every format-2
// tombstone (D id → pubkey) as its deleter's own (D id pubkey), over as
// many batches as it takes, and finishes one that a crash stopped
// between batches; afterwards each deleted event stays deleted, and a
// stranger's deletion request naming it does not lift that.
func TestSplitTombstones(t *testing.T) {
	defer func(n int) { tombstoneChunk = n }(tombstoneChunk)
	tombstoneChunk = 3
	dir := t.TempDir()
	fx := newFixtureWith(t, 2, Options{}, dir)
	var doomed []*nostr.Event
	for i := range 10 {
		e := fx.event(i%2, 1, fx.now-int64(10+i), nil, fmt.Sprint("doomed ", i))
		fx.save(e)
		fx.save(fx.event(i%2, 5, fx.now, nostr.Tags{{"e", e.IDHex()}}, ""))
		doomed = append(doomed, e)
	}
	kept := fx.event(0, 1, fx.now, nil, "kept")
	fx.save(kept)
	if err := fx.s.Close(); err != nil {
		t.Fatal(err)
	}
	// Write the tombstones back as format 2 had them, but for the last
	// two: a migration that stopped after its first batch.
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for i, e := range doomed {
		if i >= len(doomed)-2 {
			continue
		}
		if err := b.Delete(deletedIDKey(e.ID, e.PubKey), nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Set(append([]byte{pDeletedID}, e.ID[:]...), e.PubKey[:], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFormat(db, b, 2); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fx.open()
	if got := fx.format(); got != Format {
		t.Fatalf("format after the migration: %d, want %d", got, Format)
	}
	it, err := fx.s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pDeletedID}, UpperBound: []byte{pDeletedID + 1}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) != 65 || len(it.Value()) != 0 {
			t.Errorf("after the migration, tombstone key %x holds %x", it.Key(), it.Value())
		}
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if n != len(doomed) {
		t.Fatalf("%d tombstones after the migration, want %d", n, len(doomed))
	}
	for i, e := range doomed {
		stranger := 1 - i%2
		if r := fx.save(fx.event(stranger, 5, fx.now, nostr.Tags{{"e", e.IDHex()}}, "")); r != Stored {
			t.Fatalf("a stranger's deletion of note %d: %v", i, r)
		}
		if r := fx.save(e); r != Deleted {
			t.Fatalf("note %d re-offered after the migration: %v", i, r)
		}
	}
	if r := fx.save(kept); r != Duplicate {
		t.Fatalf("the kept note re-offered: %v", r)
	}
}

// prevReleaseDir is a store written by the last build before stores
// recorded their format, and the events that build served from it
// (testdata/prev-release/README.md says how it was made).
const prevReleaseDir = "testdata/prev-release"

// TestOpensPreviousRelease opens a copy of the store the previous
// release wrote: it migrates to Format, and serves exactly the events that
// release served, by id, author, kind, tag and addressable coordinate, with
// the replaced and deleted events still gone; it opens again without a
// migration, and takes new events.
func TestOpensPreviousRelease(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(prevReleaseDir, "store"))); err != nil {
		t.Fatal(err)
	}
	want := readEvents(t, filepath.Join(prevReleaseDir, "events.jsonl"))
	if len(want) < 20 {
		t.Fatalf("the fixture lists %d events", len(want))
	}
	var logs bytes.Buffer
	fx := newFixtureWith(t, 0, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, dir)
	if got := fx.format(); got != Format {
		t.Fatalf("format after opening the previous release's store: %d, want %d", got, Format)
	}
	if !strings.Contains(logs.String(), "store: migrated") {
		t.Fatalf("no migration was logged:\n%s", logs.String())
	}
	ids := func(evs []*nostr.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.IDHex())
		}
		slices.Sort(out)
		return out
	}
	if got := ids(fx.query(nostr.Filter{}, 1000)); !slices.Equal(got, ids(want)) {
		t.Fatalf("the migrated store serves %d events, the previous release served %d:\n got %v\nwant %v", len(got), len(want), got, ids(want))
	}
	// Every index finds what it found before.
	for _, e := range want {
		if got := fx.query(nostr.Filter{IDs: [][32]byte{e.ID}}, 1); len(got) != 1 || got[0].Content != e.Content || got[0].Sig != e.Sig {
			t.Fatalf("by id, %s reads back as %v", e.IDHex(), got)
		}
		authored := fx.query(nostr.Filter{Authors: [][32]byte{e.PubKey}, Kinds: []int{e.Kind}}, 100)
		if !slices.ContainsFunc(authored, func(g *nostr.Event) bool { return g.ID == e.ID }) {
			t.Fatalf("by author and kind, %s (kind %d) is not found", e.IDHex(), e.Kind)
		}
		for _, tag := range e.Tags {
			if len(tag) < 2 || len(tag[0]) != 1 {
				continue
			}
			tagged := fx.query(nostr.Filter{Tags: map[string][]string{tag[0]: {tag[1]}}}, 100)
			if !slices.ContainsFunc(tagged, func(g *nostr.Event) bool { return g.ID == e.ID }) {
				t.Fatalf("by tag %s=%s, %s is not found", tag[0], tag[1], e.IDHex())
			}
		}
	}
	if got := fx.query(nostr.Filter{Kinds: []int{30023}, Tags: map[string][]string{"d": {"post"}}}, 10); len(got) != 1 || got[0].Content != "second draft" {
		t.Fatalf("the addressable article reads as %v, want only its replacement", got)
	}
	if got := fx.query(nostr.Filter{Kinds: []int{0}}, 10); len(got) != 1 || got[0].Content != `{"name":"second"}` {
		t.Fatalf("the profile reads as %v, want only its replacement", got)
	}
	// A re-open finds the format recorded and runs no migration.
	logs.Reset()
	fx.restart()
	if got := fx.format(); got != Format || strings.Contains(logs.String(), "store: migrated") {
		t.Fatalf("format after a re-open: %d; logged %q", got, logs.String())
	}
	k, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	fx.keys = append(fx.keys, k)
	if r := fx.save(fx.event(0, 1, fx.now, nil, "after the upgrade")); r != Stored {
		t.Fatalf("save after the migration: %v", r)
	}
}

// TestRefusesNewerFormat: a store stamped with a format this build does
// not know is refused with ErrNewerFormat and a message that says what to
// do, and nothing in it is changed.
func TestRefusesNewerFormat(t *testing.T) {
	dir := t.TempDir()
	fx := newFixtureWith(t, 1, Options{}, dir)
	fx.save(fx.event(0, 1, fx.now, nil, "kept"))
	if err := fx.s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFormat(db, db.NewBatch(), Format+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("Open of a newer store: %v, want ErrNewerFormat", err)
	}
	t.Log(err)
	db, err = pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _, err := readFormat(db); err != nil || v != Format+1 {
		t.Fatalf("the refused store's format is now %d (%v)", v, err)
	}
}

// TestNewStoreIsStamped: a new store records Format at once.
func TestNewStoreIsStamped(t *testing.T) {
	fx := newFixture(t, 0)
	if got := fx.format(); got != Format {
		t.Fatalf("a new store's format: %d, want %d", got, Format)
	}
}

// format reads the open store's format key.
func (fx *fixture) format() uint64 {
	fx.t.Helper()
	v, found, err := readFormat(fx.s.db)
	if err != nil || !found {
		fx.t.Fatalf("format key: found %v, %v", found, err)
	}
	return v
}

func readEvents(t *testing.T, path string) []*nostr.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*nostr.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e nostr.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, &e)
	}
	return out
}
