package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"

	"fleetmesh.org/fleetmesh/nostr"
)

// Compaction of record segments. A record becomes dead when its event is
// removed (replaced, deleted, expired, handed off); its bytes stay in its
// segment. The writer compacts a sealed segment once at least half of it
// is dead: it reads the segment's frames in order, appends each one an E
// key still names (the live ones) to the active segment, points the key
// at the copy in the same batch, and, when the segment is done, retires
// it; the file is removed once no reader can still hold a location in it
// (records.go, epochs). Worst case the records take about twice their
// live size on disk, plus one segment.
//
// Liveness is decided frame by frame against the E keys, not from the
// live-bytes counts, which only choose the segment: a wrong count costs
// a pointless compaction, never a record.

const (
	// compactDeadShare is the dead share of a sealed segment at which it
	// is compacted.
	compactDeadShare = 0.5
	// compactStep is how many bytes of a segment one step reads; a step
	// is one batch, so saves wait for at most one step.
	compactStep = 4 << 20
	// compactStepsPerRound bounds the steps of one round, when no save
	// is waiting.
	compactStepsPerRound = 16
)

// gcState is the compaction in progress: segment seg, read up to off.
type gcState struct {
	active bool
	seg    uint32
	off    int64
	size   int64
}

// compactRound runs compaction steps while there is work and no save is
// waiting, at most compactStepsPerRound of them. It belongs to the writer.
func (s *Store) compactRound() {
	for range compactStepsPerRound {
		if len(s.writes) > 0 || s.failed != nil {
			return
		}
		more, err := s.compactOnce()
		if err != nil {
			s.opts.Logger.Error("store: compacting record segments", "err", err)
			return
		}
		if !more {
			return
		}
	}
}

// compactOnce runs one step: it picks a segment if none is in progress
// and moves the live frames of its next compactStep bytes. more is false
// when there is nothing to do.
func (s *Store) compactOnce() (more bool, err error) {
	if !s.gc.active {
		seg, end, ok := s.pickSegment()
		if !ok {
			return false, nil
		}
		s.gc = gcState{active: true, seg: seg, size: end}
	}
	done, err := s.compactFrames()
	if err != nil || !done {
		return err == nil, err
	}
	seg := s.gc.seg
	s.gc = gcState{}
	if s.rec.damaged[seg] {
		return true, nil
	}
	// Every frame before the seal was read, and each one a key names
	// moved: the segment goes, and its seal with it.
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Delete(sealKey(seg), nil); err != nil {
		return false, err
	}
	if err := s.writable(); err != nil {
		return false, err
	}
	if err := s.commitBatch(b); err != nil {
		s.recover(err)
		return false, err
	}
	s.rec.retire(seg)
	return true, nil
}

// pickSegment chooses the sealed segment with the largest dead share, if
// one has at least compactDeadShare; none before the loader has counted
// the live bytes. end is the segment's sealed end.
func (s *Store) pickSegment() (seg uint32, end int64, ok bool) {
	l := s.rec
	if l.live == nil {
		return 0, 0, false
	}
	best := -1.0
	for id, sealEnd := range l.sealed {
		if id == l.active || l.damaged[id] {
			continue
		}
		if sealEnd == 0 {
			return id, 0, true
		}
		dead := float64(int64(sealEnd)-l.live[id]) / float64(sealEnd)
		if dead >= compactDeadShare && dead > best {
			best, seg, end, ok = dead, id, int64(sealEnd), true
		}
	}
	return seg, end, ok
}

// compactFrames moves the live frames of the next compactStep bytes of
// the segment in progress (whole frames; one frame larger than a step is
// read whole), in one batch; done is true when the segment's frames are
// all read. A frame that does not parse before the seal is damage: the
// segment is marked damaged and left as it is, so that no record a key
// names is ever dropped by a compaction.
func (s *Store) compactFrames() (done bool, err error) {
	l := s.rec
	seg := s.gc.seg
	l.mu.Lock()
	sg := l.segs[seg]
	l.mu.Unlock()
	if sg == nil || s.gc.off >= s.gc.size {
		return true, nil
	}
	readAt := func(n int64) ([]byte, error) {
		buf := make([]byte, n)
		if m, err := sg.readFile(buf, s.gc.off); int64(m) != n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read segment %s at %d: %w", segmentName(seg), s.gc.off, err)
		}
		return buf, nil
	}
	buf, err := readAt(min(int64(compactStep), s.gc.size-s.gc.off))
	if err != nil {
		return false, err
	}
	if len(buf) >= frameHeader {
		if size := int64(frameHeader) + int64(binary.LittleEndian.Uint32(buf)); size > int64(len(buf)) && size <= frameHeader+maxFrame && s.gc.off+size <= s.gc.size {
			if buf, err = readAt(size); err != nil {
				return false, err
			}
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	defer l.abort()
	at, moved := 0, 0
	for at < len(buf) {
		var size int
		if len(buf)-at >= frameHeader {
			size = frameHeader + int(binary.LittleEndian.Uint32(buf[at:]))
		}
		if size == 0 || size > len(buf)-at {
			if s.gc.off+int64(len(buf)) >= s.gc.size || at == 0 {
				// Not a frame the step's end cut: the bytes do not parse.
				s.markDamaged(seg, s.gc.off+int64(at), fmt.Errorf("%w: a frame runs past the segment's seal", errBadFrame))
				return true, nil
			}
			break // the next step reads it
		}
		serial, payload, perr := parseFrame(buf[at : at+size])
		if perr != nil {
			s.markDamaged(seg, s.gc.off+int64(at), perr)
			return true, nil
		}
		here := loc{seg: seg, off: uint32(s.gc.off) + uint32(at), size: uint32(size)}
		live, err := s.namesFrame(serial, here)
		if err != nil {
			return false, err
		}
		if live {
			var ev nostr.Event
			if err := decodeEvent(payload, &ev); err != nil {
				s.markDamaged(seg, s.gc.off+int64(at), fmt.Errorf("event %d: %w", serial, err))
				return true, nil
			}
			lc, err := l.add(serial, payload)
			if err != nil {
				return false, err
			}
			if err := setKeys(b, &ev, serial, lc); err != nil {
				return false, err
			}
			l.dropped(here)
			moved++
		}
		at += size
	}
	if moved > 0 {
		if err := s.writable(); err != nil {
			return false, err
		}
		if err := s.commitBatch(b); err != nil {
			s.recover(err)
			return false, err
		}
	}
	s.gc.off += int64(at)
	return s.gc.off >= s.gc.size, nil
}

// markDamaged leaves segment seg out of compaction for good, and says so.
func (s *Store) markDamaged(seg uint32, off int64, err error) {
	s.rec.damaged[seg] = true
	s.opts.Logger.Error("store: a record segment is damaged; it is kept as it is and not compacted (records it holds past the damage may not be readable: restore a backup if queries report errors)",
		"segment", segmentName(seg), "offset", off, "err", err)
}

// namesFrame says whether event serial's key names the frame at here.
func (s *Store) namesFrame(serial uint64, here loc) (bool, error) {
	v, c, err := s.db.Get(eventKey(serial))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	defer c.Close()
	lc, ok := parseLoc(v)
	return ok && lc == here, nil
}
