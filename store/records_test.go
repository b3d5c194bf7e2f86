package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"fleetmesh.org/fleetmesh/nostr"
)

// segmentFiles lists the record segment files of the store in dir.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, recordsDir, "*.rec"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestCompactionReclaims replaces one profile many times with small
// segments, so that most sealed segments hold only dead records, and
// checks that compaction removes them while queries run beside it, and
// that every live event is served before, during and after, and after a
// restart.
func TestCompactionReclaims(t *testing.T) {
	fx := newFixtureWith(t, 1, Options{segmentBytes: 4 << 10}, t.TempDir())
	var notes []*nostr.Event
	var profile *nostr.Event
	for i := range 300 {
		profile = fx.event(0, 0, fx.now+int64(i), nil, fmt.Sprintf(`{"name":"n%d","about":"%s"}`, i, bytes.Repeat([]byte("x"), 200)))
		fx.save(profile)
		if i%6 == 0 {
			n := fx.event(0, 1, fx.now+int64(i), nil, fmt.Sprint("note ", i))
			fx.save(n)
			notes = append(notes, n)
		}
	}
	want := append([]string{profile.IDHex()[:8]}, ids(notes)...)
	slices.Sort(want)
	all := func() []string {
		got := ids(fx.query(nostr.Filter{Authors: [][32]byte{fx.keys[0].PubKey()}}, 1000))
		slices.Sort(got)
		return got
	}
	if got := all(); !slices.Equal(got, want) {
		t.Fatalf("before compaction: %v, want %v", got, want)
	}
	before := len(segmentFiles(t, fx.dir))
	bytesBefore := fx.s.rec.bytes()

	// Readers beside the compaction: every query sees every live event.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 1)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var got []string
				err := fx.s.Query(context.Background(), &nostr.Filter{Authors: [][32]byte{fx.keys[0].PubKey()}}, 1000, func(e *nostr.Event) bool {
					got = append(got, e.IDHex()[:8])
					return true
				})
				slices.Sort(got)
				if err == nil && !slices.Equal(got, want) {
					err = fmt.Errorf("query during compaction: %v, want %v", got, want)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	fx.compact()
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	after := len(segmentFiles(t, fx.dir))
	if after*3 > before {
		t.Fatalf("compaction left %d of %d segment files", after, before)
	}
	if got := fx.s.rec.bytes(); got*2 > bytesBefore {
		t.Fatalf("records take %d bytes after compaction, %d before", got, bytesBefore)
	}
	if got := all(); !slices.Equal(got, want) {
		t.Fatalf("after compaction: %v, want %v", got, want)
	}
	fx.restart()
	if got := all(); !slices.Equal(got, want) {
		t.Fatalf("after a restart: %v, want %v", got, want)
	}
	if got := len(segmentFiles(t, fx.dir)); got != after {
		t.Fatalf("%d segment files after a restart, %d before it", got, after)
	}
	t.Logf("segments %d -> %d, bytes %d -> %d", before, after, bytesBefore, fx.s.rec.bytes())
}

// TestUncommittedRecordsDropped leaves what a crash between a batch's
// record write and its commit leaves (bytes past the committed tail, a
// segment past the tail's) and checks that the store opens, serves what
// was committed, and writes over them.
func TestUncommittedRecordsDropped(t *testing.T) {
	fx := newFixture(t, 1)
	var saved []*nostr.Event
	for i := range 5 {
		e := fx.event(0, 1, fx.now+int64(i), nil, fmt.Sprint("kept ", i))
		fx.save(e)
		saved = append(saved, e)
	}
	if err := fx.s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, fx.dir)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	f, err := os.OpenFile(segs[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	orphan := fx.event(0, 1, fx.now, nil, "never committed")
	f.Write(appendFrame(nil, 99, encodeEvent(nil, orphan)))
	f.Write([]byte("half a frame"))
	f.Close()
	stray := filepath.Join(fx.dir, recordsDir, segmentName(7))
	if err := os.WriteFile(stray, appendFrame(nil, 100, encodeEvent(nil, orphan)), 0o600); err != nil {
		t.Fatal(err)
	}
	fx.open()
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("the uncommitted segment is still there (%v)", err)
	}
	if got := fx.query(nostr.Filter{IDs: [][32]byte{orphan.ID}}, 1); len(got) != 0 {
		t.Fatal("an uncommitted record is served")
	}
	e := fx.event(0, 1, fx.now+10, nil, "written over the orphans")
	fx.save(e)
	saved = append(saved, e)
	fx.restart()
	got := ids(fx.query(nostr.Filter{Kinds: []int{1}}, 100))
	want := ids(saved)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the orphans: %v, want %v", got, want)
	}
}

// downgrade turns the store in dir back into one of format 1 for the
// events whose serial pick chooses: their E keys hold the record again,
// their I keys the serial alone and their index keys nothing.
// With all, the records' tail, seals and segments go too, as in a store
// format 1 wrote.
func downgrade(t *testing.T, dir string, pick func(serial uint64) bool, all bool) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seals, err := readSeals(db)
	if err != nil {
		t.Fatal(err)
	}
	haveTail, seg, off, err := readTail(db)
	if err != nil || !haveTail {
		t.Fatalf("tail: %v %v", haveTail, err)
	}
	rl, err := openRecordLog(vfs.Default, dir, 0, true, seg, off, seals)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	it, _ := db.NewIter(&pebble.IterOptions{LowerBound: []byte{pEvent}, UpperBound: []byte{pEvent + 1}})
	for ok := it.First(); ok; ok = it.Next() {
		serial := binary.BigEndian.Uint64(it.Key()[1:])
		if !pick(serial) {
			continue
		}
		lc, ok := parseLoc(it.Value())
		if !ok {
			t.Fatalf("event %d holds no location", serial)
		}
		rec, err := rl.read(lc, serial, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ev nostr.Event
		if err := decodeEvent(rec, &ev); err != nil {
			t.Fatal(err)
		}
		b.Set(slices.Clone(it.Key()), slices.Clone(rec), nil)
		b.Set(idKey(ev.ID), u64(nil, serial), nil)
		for _, k := range indexKeys(&ev, serial) {
			b.Set(k, nil, nil)
		}
	}
	it.Close()
	b.Set(formatKey, binary.AppendUvarint(nil, 1), nil)
	if all {
		b.Delete(tailKey, nil)
		b.DeleteRange(sealPrefix, prefixEnd(sealPrefix), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	rl.close()
	db.Close()
	if all {
		os.RemoveAll(filepath.Join(dir, recordsDir))
	}
}

// TestMigrateFormat1 opens stores of format 1, whose records are in
// Pebble: one as format 1 wrote it, and one whose migration stopped half
// way (every other record moved); both open as format 2 and serve every
// event, and the first keeps none of its records in Pebble.
func TestMigrateFormat1(t *testing.T) {
	for _, tt := range []struct {
		name string
		pick func(uint64) bool
		all  bool
	}{
		{"written by format 1", func(uint64) bool { return true }, true},
		{"migration cut half way", func(s uint64) bool { return s%2 == 0 }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixtureWith(t, 2, Options{segmentBytes: 2 << 10}, t.TempDir())
			var saved []*nostr.Event
			for i := range 40 {
				e := fx.event(i%2, 1, fx.now+int64(i), nostr.Tags{{"t", "m"}}, fmt.Sprint("event ", i))
				fx.save(e)
				saved = append(saved, e)
			}
			fx.s.Close()
			downgrade(t, fx.dir, tt.pick, tt.all)
			fx.open()
			got := ids(fx.query(nostr.Filter{Tags: map[string][]string{"t": {"m"}}}, 100))
			want := ids(saved)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("after migration: %v, want %v", got, want)
			}
			v, _, err := readFormat(fx.s.db)
			if err != nil || v != Format {
				t.Fatalf("format %d (%v), want %d", v, err, Format)
			}
			it, _ := fx.s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pEvent}, UpperBound: []byte{pEvent + 1}})
			for ok := it.First(); ok; ok = it.Next() {
				if _, ok := parseLoc(it.Value()); !ok {
					t.Fatalf("event key %x still holds its record", it.Key())
				}
			}
			it.Close()
			fx.restart()
			if got := fx.query(nostr.Filter{Tags: map[string][]string{"t": {"m"}}}, 100); len(got) != len(saved) {
				t.Fatalf("after a restart: %d events, want %d", len(got), len(saved))
			}
		})
	}
}

func FuzzParseFrame(f *testing.F) {
	f.Add(appendFrame(nil, 7, []byte("record")))
	f.Add(make([]byte, frameHeader))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		serial, payload, err := parseFrame(b)
		if err != nil {
			return
		}
		if again := appendFrame(nil, serial, payload); !bytes.Equal(again, b) {
			t.Fatalf("a frame that parses re-encodes differently:\n%x\n%x", b, again)
		}
	})
}

func FuzzParseLoc(f *testing.F) {
	f.Add(loc{1, 2, 3}.bytes())
	f.Add(loc{7, 100, frameHeader + 5}.bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		lc, ok := parseLoc(b)
		if !ok {
			return
		}
		if !bytes.Equal(lc.bytes(), b) || lc.size < frameHeader {
			t.Fatalf("location %x parses to %+v", b, lc)
		}
	})
}

// openFilesUnder counts this process's descriptors open on files under
// dir (Linux's /proc/self/fd); ok is false where that cannot be read.
func openFilesUnder(t *testing.T, dir string) (n int, ok bool) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n, true
}

// TestStoreHoldsItsFileShare checks that mapped segments keep no
// descriptor, however many there are, and that the store as a whole
// stays within MaxOpenFiles, Pebble being given the rest after the
// records' own.
func TestStoreHoldsItsFileShare(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("32-bit builds read segments with pread and keep them open")
	}
	const maxOpen = 80
	fx := newFixtureWith(t, 1, Options{segmentBytes: 4 << 10, MaxOpenFiles: maxOpen}, t.TempDir())
	if got := fx.s.po.MaxOpenFiles; got != maxOpen-recordFiles {
		t.Fatalf("Pebble's MaxOpenFiles %d, want %d", got, maxOpen-recordFiles)
	}
	var notes []*nostr.Event
	for i := range 120 {
		n := fx.event(0, 1, fx.now+int64(i), nil, fmt.Sprintf("note %d %s", i, bytes.Repeat([]byte("x"), 200)))
		fx.save(n)
		notes = append(notes, n)
	}
	if segs := len(segmentFiles(t, fx.dir)); segs < 5 {
		t.Fatalf("%d segment files, want several", segs)
	}
	check := func(when string) {
		t.Helper()
		got := ids(fx.query(nostr.Filter{Authors: [][32]byte{fx.keys[0].PubKey()}}, 1000))
		want := ids(notes)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: read %d events, want %d", when, len(got), len(want))
		}
		recs, ok := openFilesUnder(t, filepath.Join(fx.dir, recordsDir))
		if !ok {
			t.Skip("no /proc/self/fd to count descriptors")
		}
		if recs != 1 {
			t.Fatalf("%s: the records hold %d descriptors, want 1 (the active segment's writer)", when, recs)
		}
		if all, _ := openFilesUnder(t, fx.dir); all > maxOpen {
			t.Fatalf("%s: the store holds %d descriptors, over its %d", when, all, maxOpen)
		}
	}
	check("after the saves")
	fx.restart()
	check("after a restart")
}
