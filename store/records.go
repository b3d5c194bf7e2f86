package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The event records live outside Pebble, in append-only segment files
// under the store's records/ directory (see the package doc for why).
// Each record is one frame:
//
//	u32 len(payload) | u32 crc32c(serial ‖ payload) | u64 serial | payload
//
// (little-endian; the payload is the record encoding of codec.go), and
// each E key's value is the frame's location: segment, offset and the
// frame's whole size, 12 bytes. The serial in the frame lets a read check
// that a location names the record it should, and lets the compactor
// (recordgc.go) tell a segment's live frames from its dead ones.

const (
	frameHeader = 16
	locBytes    = 12
	// maxFrame bounds a frame's payload: an event record is far smaller
	// (the relay bounds events to tens of KiB); a header that claims more
	// is damage, not a record.
	maxFrame = 16 << 20
	// recordsDir is the segments' directory inside the store's.
	recordsDir = "records"
	// defaultSegmentBytes is the size past which the active segment is
	// sealed and a new one started.
	defaultSegmentBytes = 128 << 20
	// recordFiles is the most descriptors the records hold at once where
	// segments are mapped: the active segment's writer, a read past a
	// mapping, and the directory a new segment syncs. Where they cannot
	// be (32-bit builds), each segment keeps one more.
	recordFiles = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadFrame is wrapped by every frame that fails its checks.
var errBadFrame = errors.New("store: damaged event record frame")

// loc is where a record's frame is: a segment, an offset in it, and the
// frame's size including its header.
type loc struct {
	seg, off, size uint32
}

func (l loc) bytes() []byte {
	b := make([]byte, locBytes)
	binary.BigEndian.PutUint32(b[0:], l.seg)
	binary.BigEndian.PutUint32(b[4:], l.off)
	binary.BigEndian.PutUint32(b[8:], l.size)
	return b
}

// parseLoc reads an E key's value; ok is false for any other length (a
// record of a store older than format 2 holds the record itself).
func parseLoc(v []byte) (l loc, ok bool) {
	if len(v) != locBytes {
		return loc{}, false
	}
	l = loc{binary.BigEndian.Uint32(v[0:]), binary.BigEndian.Uint32(v[4:]), binary.BigEndian.Uint32(v[8:])}
	return l, l.size >= frameHeader
}

// appendFrame appends payload's frame for serial to dst.
func appendFrame(dst []byte, serial uint64, payload []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, serial)
	dst = append(dst, payload...)
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], castagnoli))
	return dst
}

// parseFrame checks a frame read whole from b and returns its serial and
// payload (a slice of b).
func parseFrame(b []byte) (serial uint64, payload []byte, err error) {
	if len(b) < frameHeader {
		return 0, nil, fmt.Errorf("%w: %d bytes, shorter than a header", errBadFrame, len(b))
	}
	n := binary.LittleEndian.Uint32(b[0:])
	if n > maxFrame || int(n) != len(b)-frameHeader {
		return 0, nil, fmt.Errorf("%w: its header says %d bytes of record, %d follow", errBadFrame, n, len(b)-frameHeader)
	}
	if crc32.Checksum(b[8:], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return 0, nil, fmt.Errorf("%w: checksum mismatch", errBadFrame)
	}
	return binary.LittleEndian.Uint64(b[8:]), b[frameHeader:], nil
}

// segmentName is segment id's file name.
func segmentName(id uint32) string { return fmt.Sprintf("%06d.rec", id) }

// parseSegmentName is segmentName's inverse.
func parseSegmentName(name string) (uint32, bool) {
	s, ok := strings.CutSuffix(name, ".rec")
	if !ok || len(s) < 6 {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 32)
	return uint32(id), err == nil && id > 0
}

// recordLog is the store's segment files. Reads (read) come from any
// goroutine; everything else belongs to the store's writer.
//
// A save appends its frame to pending, which the writer writes and syncs
// (flush) before it commits the Pebble batch that points at it, so no
// E key ever names bytes that are not on disk. A batch that fails leaves
// frames past the committed tail; they are overwritten by the next
// flush, and the tail itself is in Pebble (tailKey), written by every
// batch that appends, so a crash loses nothing that was acknowledged and
// keeps nothing that was not.
type recordLog struct {
	fs       vfs.FS
	dir      string
	segBytes uint32

	mu   sync.Mutex
	segs map[uint32]*segment // every segment on disk, open for reads
	ep   epochs

	// The writer's.
	active    uint32
	w         vfs.File // the active segment, open for writing
	tail      uint32   // committed end of the active segment
	pending   []byte   // frames of the batch being built, from pendStart
	pendStart uint32
	// sealed is the committed end of every sealed segment (sealKey);
	// sealing is a seal the next commit must record.
	sealed  map[uint32]uint32
	sealing *[2]uint32
	// damaged are segments the compactor found a bad frame in: they are
	// left as they are.
	damaged map[uint32]bool
	// live is the bytes of live frames per segment, for the compactor;
	// nil until the loader has counted them (see loadState), and kept as
	// liveDelta meanwhile. batchLive is the current batch's changes.
	live      map[uint32]int64
	liveDelta map[uint32]int64
	batchLive map[uint32]int64
}

// segment is one segment file, mapped for reads where the platform
// allows (mapFile): a read is then a slice of the mapping, with no system
// call and no copy, as LMDB's readers have it. A mapped segment keeps no
// descriptor (a mapping outlives its file's close), so a large store's
// segments do not eat the file share spec/limits.md gives the store; the
// rare read past the mapping opens the file for that read. An unmapped
// segment (a 32-bit build, a filesystem with no descriptors) keeps its
// file open for pread.
type segment struct {
	fs   vfs.FS
	path string
	f    vfs.File // nil when mapped
	data []byte
}

// openSegment opens segment file path for reads and maps mapBytes of it.
func openSegment(fs vfs.FS, path string, mapBytes int) (*segment, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	sg := &segment{fs: fs, path: path, f: f}
	if fd := f.Fd(); fd != vfs.InvalidFd {
		sg.data = mapFile(fd, mapBytes)
	}
	if sg.data != nil {
		sg.f = nil
		if err := f.Close(); err != nil {
			unmapFile(sg.data)
			return nil, err
		}
	}
	return sg, nil
}

// readFile reads len(b) bytes at off from the file, never the mapping:
// for reads past the mapping, and for compaction, which walks a whole
// segment and should meet a file shorter than its seal says (damage) as
// an error, where the mapping would fault.
func (sg *segment) readFile(b []byte, off int64) (int, error) {
	if sg.f != nil {
		return sg.f.ReadAt(b, off)
	}
	f, err := sg.fs.Open(sg.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.ReadAt(b, off)
}

// size is the segment file's size, read from its path whether or not the
// segment holds the file open.
func (sg *segment) size() (int64, error) {
	fi, err := sg.fs.Stat(sg.path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// close unmaps the segment and closes its file if it has one open.
func (sg *segment) close() error {
	unmapFile(sg.data)
	sg.data = nil
	if sg.f == nil {
		return nil
	}
	return sg.f.Close()
}

// mapBytes is how much of a segment is mapped: past its end by room for
// the batches that may still grow it (one batch may take the active
// segment past segBytes), so the active segment needs no new mapping.
func (l *recordLog) mapBytes(size int64) int {
	return int(max(size, 2*int64(l.segBytes)+64<<20))
}

// sealKey holds a sealed segment's committed end (big-endian u32): its
// frames are exactly the bytes before it.
func sealKey(seg uint32) []byte { return binary.BigEndian.AppendUint32([]byte("\x00recseal"), seg) }

// sealPrefix is the prefix of every sealKey.
var sealPrefix = []byte("\x00recseal")

// tailKey holds the records' committed tail: active segment and offset,
// big-endian u32s. 0x00 sorts before every data prefix.
var tailKey = []byte("\x00rectail")

func encodeTail(seg, off uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, seg), off)
}

func decodeTail(v []byte) (seg, off uint32, err error) {
	if len(v) != 8 {
		return 0, 0, fmt.Errorf("store: the records' tail key holds %x: the store is damaged; restore a backup", v)
	}
	return binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[4:]), nil
}

// openRecordLog opens the segments in dir/records. With haveTail, the
// committed tail is (seg, off): segments after seg were started by a
// batch that never committed and are removed, as are those before it
// that sealed (their seals) does not name, which compaction emptied; the
// active segment is written from off. Without it (a new store, or one
// from before format 2), every segment file is such a leftover.
func openRecordLog(fs vfs.FS, dir string, segBytes uint32, haveTail bool, seg, off uint32, sealed map[uint32]uint32) (*recordLog, error) {
	if segBytes == 0 {
		segBytes = defaultSegmentBytes
	}
	l := &recordLog{fs: fs, dir: fs.PathJoin(dir, recordsDir), segBytes: segBytes, segs: map[uint32]*segment{},
		liveDelta: map[uint32]int64{}, batchLive: map[uint32]int64{}, sealed: sealed, damaged: map[uint32]bool{}}
	l.ep.init()
	if err := fs.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: records: %w", err)
	}
	names, err := fs.List(l.dir)
	if err != nil {
		return nil, fmt.Errorf("store: records: %w", err)
	}
	var ids []uint32
	for _, name := range names {
		if id, ok := parseSegmentName(name); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		// Past the tail: started by a batch that never committed. Below
		// it with no seal: compacted, its seal deleted, its file not yet.
		if _, sealed := sealed[id]; !haveTail || id > seg || id < seg && !sealed {
			if err := fs.Remove(fs.PathJoin(l.dir, segmentName(id))); err != nil {
				return nil, fmt.Errorf("store: records: removing an uncommitted segment: %w", err)
			}
			continue
		}
		path := fs.PathJoin(l.dir, segmentName(id))
		fi, err := fs.Stat(path)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("store: records: %w", err)
		}
		sg, err := openSegment(fs, path, l.mapBytes(fi.Size()))
		if err != nil {
			l.close()
			return nil, fmt.Errorf("store: records: %w", err)
		}
		l.segs[id] = sg
	}
	if !haveTail {
		if err := l.startSegment(1); err != nil {
			l.close()
			return nil, err
		}
		return l, nil
	}
	if _, ok := l.segs[seg]; !ok {
		l.close()
		return nil, fmt.Errorf("store: records: segment %s, which the store's tail names, is missing from %s: the store is damaged; restore a backup", segmentName(seg), l.dir)
	}
	w, err := fs.OpenReadWrite(fs.PathJoin(l.dir, segmentName(seg)), vfs.WriteCategoryUnspecified)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("store: records: %w", err)
	}
	l.active, l.w, l.tail = seg, w, off
	return l, nil
}

// startSegment creates segment id, empty, as the active one, durably (the
// directory is synced, so a crash keeps the file).
func (l *recordLog) startSegment(id uint32) error {
	path := l.fs.PathJoin(l.dir, segmentName(id))
	w, err := l.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("store: records: new segment: %w", err)
	}
	r, err := openSegment(l.fs, path, l.mapBytes(0))
	if err != nil {
		w.Close()
		return fmt.Errorf("store: records: new segment: %w", err)
	}
	if err := l.syncDir(); err != nil {
		w.Close()
		r.close()
		return err
	}
	if l.w != nil {
		l.w.Close()
	}
	l.mu.Lock()
	l.segs[id] = r
	l.mu.Unlock()
	l.active, l.w, l.tail = id, w, 0
	return nil
}

func (l *recordLog) syncDir() error {
	d, err := l.fs.OpenDir(l.dir)
	if err != nil {
		return fmt.Errorf("store: records: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: records: sync the directory: %w", err)
	}
	return nil
}

// add appends serial's frame to the batch being built and returns its
// location. It starts a new segment first when the active one is full
// and nothing is pending.
func (l *recordLog) add(serial uint64, payload []byte) (loc, error) {
	if len(l.pending) == 0 {
		if l.tail >= l.segBytes {
			old, end := l.active, l.tail
			if err := l.startSegment(l.active + 1); err != nil {
				return loc{}, err
			}
			l.sealing = &[2]uint32{old, end}
		}
		l.pendStart = l.tail
	}
	off := l.pendStart + uint32(len(l.pending))
	l.pending = appendFrame(l.pending, serial, payload)
	lc := loc{seg: l.active, off: off, size: uint32(len(l.pending)) - (off - l.pendStart)}
	l.batchLive[lc.seg] += int64(lc.size)
	return lc, nil
}

// dropped counts the frame at lc as dead from the current batch on.
func (l *recordLog) dropped(lc loc) { l.batchLive[lc.seg] -= int64(lc.size) }

// prepare writes into b what the batch's commit must carry: the new tail
// when frames are pending, and the seal of a segment sealed since the
// last commit.
func (l *recordLog) prepare(b *pebble.Batch) error {
	if len(l.pending) == 0 {
		return nil
	}
	if l.sealing != nil {
		if err := b.Set(sealKey(l.sealing[0]), binary.BigEndian.AppendUint32(nil, l.sealing[1]), nil); err != nil {
			return err
		}
	}
	return b.Set(tailKey, encodeTail(l.active, l.pendStart+uint32(len(l.pending))), nil)
}

// flush writes the pending frames and syncs them; the batch that points
// at them may then commit.
func (l *recordLog) flush() error {
	if len(l.pending) == 0 {
		return nil
	}
	if _, err := l.w.WriteAt(l.pending, int64(l.pendStart)); err != nil {
		return fmt.Errorf("store: records: write: %w", err)
	}
	if err := l.w.SyncData(); err != nil {
		return fmt.Errorf("store: records: sync: %w", err)
	}
	return nil
}

// committed moves the tail past the flushed frames, after their batch
// committed.
func (l *recordLog) committed() {
	if len(l.pending) > 0 {
		l.tail = l.pendStart + uint32(len(l.pending))
		if l.sealing != nil {
			l.sealed[l.sealing[0]] = l.sealing[1]
			l.sealing = nil
		}
	}
	counts := l.liveDelta
	if l.live != nil {
		counts = l.live
	}
	for seg, n := range l.batchLive {
		counts[seg] += n
	}
	l.abort()
}

// abort forgets the batch being built.
func (l *recordLog) abort() {
	l.pending = l.pending[:0]
	if cap(l.pending) > 4<<20 {
		l.pending = nil // one huge batch does not pin its buffer
	}
	clear(l.batchLive)
}

// reset forgets the batch being built after a failed commit, and takes
// the committed tail from the reopened database (haveTail false: nothing
// was ever committed). A segment the failed batch started stays active,
// empty as far as any batch knows.
func (l *recordLog) reset(haveTail bool, seg, off uint32) {
	l.abort()
	switch {
	case haveTail && seg == l.active:
		l.tail = off
	case !haveTail || seg < l.active:
		l.tail = 0
	}
}

// loaded takes the live bytes per segment the loader counted on the
// store as it was at Open; what committed since then is added to it.
func (l *recordLog) loaded(live map[uint32]int64) {
	for seg, n := range l.liveDelta {
		live[seg] += n
	}
	l.live, l.liveDelta = live, nil
}

// readPending serves the writer a frame of the batch being built, or
// reads it from disk; see read.
func (l *recordLog) readPending(lc loc, serial uint64) ([]byte, error) {
	if len(l.pending) > 0 && lc.seg == l.active && lc.off >= l.pendStart {
		at := lc.off - l.pendStart
		if uint64(at)+uint64(lc.size) > uint64(len(l.pending)) {
			return nil, fmt.Errorf("%w: location %+v is past the pending frames", errBadFrame, lc)
		}
		return checkFrame(slices.Clone(l.pending[at:at+lc.size]), serial, lc)
	}
	return l.read(lc, serial, nil)
}

// read returns serial's record at lc: a slice of the segment's mapping,
// or else read into *buf (grown as needed, and kept there for the
// caller's next read; nil buf reads into a new buffer). The caller holds
// an epoch (enter) whose snapshot gave it lc, so the segment is neither
// unmapped nor removed under it, and uses the record only within it.
func (l *recordLog) read(lc loc, serial uint64, buf *[]byte) ([]byte, error) {
	l.mu.Lock()
	sg := l.segs[lc.seg]
	l.mu.Unlock()
	if sg == nil {
		return nil, fmt.Errorf("%w: event %d names segment %d, which is not on disk", errBadFrame, serial, lc.seg)
	}
	if end := uint64(lc.off) + uint64(lc.size); end <= uint64(len(sg.data)) {
		return checkFrame(sg.data[lc.off:end], serial, lc)
	}
	var b []byte
	if buf != nil {
		*buf = slices.Grow((*buf)[:0], int(lc.size))[:lc.size]
		b = *buf
	} else {
		b = make([]byte, lc.size)
	}
	if n, err := sg.readFile(b, int64(lc.off)); n != len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("store: records: read event %d at %+v: %w", serial, lc, err)
	}
	return checkFrame(b, serial, lc)
}

// checkFrame parses a frame read at lc and checks it is serial's.
func checkFrame(b []byte, serial uint64, lc loc) ([]byte, error) {
	got, payload, err := parseFrame(b)
	if err != nil {
		return nil, fmt.Errorf("event %d at %+v: %w", serial, lc, err)
	}
	if got != serial {
		return nil, fmt.Errorf("%w: event %d's location %+v holds event %d", errBadFrame, serial, lc, got)
	}
	return payload, nil
}

// diskFiles lists the segment files, for the store's size.
func (l *recordLog) diskFiles() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.segs))
	for id := range l.segs {
		out = append(out, l.fs.PathJoin(l.dir, segmentName(id)))
	}
	return out
}

// bytes is the segments' total size.
func (l *recordLog) bytes() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n uint64
	for _, sg := range l.segs {
		if size, err := sg.size(); err == nil {
			n += uint64(size)
		}
	}
	return n
}

// close closes every file.
func (l *recordLog) close() error {
	var err error
	if l.w != nil {
		err = l.w.Close()
		l.w = nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, sg := range l.segs {
		err = errors.Join(err, sg.close())
		delete(l.segs, id)
	}
	l.ep.retired = nil
	return err
}

// epochs let the compactor remove a segment only once no reader can still
// hold a location in it. A reader enters before it takes its snapshot and
// leaves when done; a segment retired at epoch g is removed once every
// reader that entered at g or before has left, since readers that enter
// later take snapshots in which no location names it.
type epochs struct {
	cur     uint64
	readers map[uint64]int
	retired []retiredSegment
}

type retiredSegment struct {
	gen uint64
	id  uint32
}

func (e *epochs) init() { e.readers = map[uint64]int{} }

// enter registers a reader and returns its epoch, for leave.
func (l *recordLog) enter() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ep.readers[l.ep.cur]++
	return l.ep.cur
}

// leave ends a reader's epoch and removes the segments no one can read
// any more.
func (l *recordLog) leave(g uint64) {
	l.mu.Lock()
	if l.ep.readers[g]--; l.ep.readers[g] <= 0 {
		delete(l.ep.readers, g)
	}
	gone := l.reapLocked()
	l.mu.Unlock()
	l.remove(gone)
}

// retire takes segment id out of use: the batch that moved its live
// frames has committed, so no snapshot taken from now on names it. It
// stays readable, and its file goes, when the readers that might still
// hold a location in it have left.
func (l *recordLog) retire(id uint32) {
	l.mu.Lock()
	l.ep.retired = append(l.ep.retired, retiredSegment{gen: l.ep.cur, id: id})
	l.ep.cur++
	if l.live != nil {
		delete(l.live, id)
	}
	delete(l.sealed, id)
	gone := l.reapLocked()
	l.mu.Unlock()
	l.remove(gone)
}

// reapLocked takes out of segs the retired segments no reader can reach,
// for remove.
func (l *recordLog) reapLocked() []uint32Seg {
	oldest := l.ep.cur
	for g := range l.ep.readers {
		oldest = min(oldest, g)
	}
	var gone []uint32Seg
	l.ep.retired = slices.DeleteFunc(l.ep.retired, func(r retiredSegment) bool {
		if r.gen >= oldest {
			return false
		}
		if sg := l.segs[r.id]; sg != nil {
			gone = append(gone, uint32Seg{r.id, sg})
			delete(l.segs, r.id)
		}
		return true
	})
	return gone
}

// uint32Seg is a segment with its id.
type uint32Seg struct {
	id uint32
	sg *segment
}

// remove closes and deletes reaped segments. A file that cannot be
// deleted now stays until a later compaction: no location names it, and
// it has no seal, so it is never read or compacted again; Open removes
// segment files without a seal below the active one.
func (l *recordLog) remove(gone []uint32Seg) {
	for _, g := range gone {
		g.sg.close()
		l.fs.Remove(l.fs.PathJoin(l.dir, segmentName(g.id)))
	}
}
