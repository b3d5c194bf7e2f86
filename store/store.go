package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// Result says what Save did with an event: eventstore.Result, named here
// too as os names io/fs's types.
type Result = eventstore.Result

// Save results (eventstore's).
const (
	Stored     = eventstore.Stored
	Duplicate  = eventstore.Duplicate
	Superseded = eventstore.Superseded
	Deleted    = eventstore.Deleted
	Expired    = eventstore.Expired
)

// ErrClosed is returned by calls on a closed store.
var ErrClosed = errors.New("store: closed")

// Options are the store's bounds. Zero values take the defaults.
type Options struct {
	// CacheBytes is Pebble's block cache size (default 64 MiB).
	CacheBytes int64
	// MemTableBytes is the size of each Pebble memtable (default 16 MiB).
	MemTableBytes uint64
	// MaxBatch is how many saves one commit gathers at most (default 1024).
	MaxBatch int
	// MaxScan bounds how many index entries one query may examine (default
	// 200,000), so a filter no index serves well cannot stall the node.
	MaxScan int
	// SweepEvery is how often expired events are removed (default 1 min).
	SweepEvery time.Duration
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
	// Logger receives Pebble's and the sweeper's messages (default: discard).
	Logger *slog.Logger
	// MaxBytes bounds the store's size on disk (0: no bound); at it, saves
	// fail with ErrFull. Saves also fail with ErrFull when the filesystem
	// has less than 2.2 memtables and 4 MiB free (bound.go).
	MaxBytes uint64
	// MaxOpenFiles bounds the descriptors the store holds (0: Pebble's
	// default of 1,000 for its own files). The records keep recordFiles
	// of them (segments are mapped and hold none, records.go); Pebble,
	// whose file cache takes all but 10 of its share, gets the rest. The
	// node gives it the store's share of the file budget (spec/limits.md).
	MaxOpenFiles int

	// segmentBytes is the size past which a record segment is sealed
	// (default defaultSegmentBytes); tests make it small.
	segmentBytes uint32
	// compactEvery is how often the writer looks for a record segment to
	// compact (default 5 s).
	compactEvery time.Duration

	// fs is the filesystem Pebble writes to (default: the OS's); tests
	// wrap it to inject faults.
	fs vfs.FS
	// wrapBatch, when set, wraps each save's view of the shared batch;
	// tests use it to fail a save at a chosen step.
	wrapBatch func(*nostr.Event, batchRW) batchRW
	// retryMin is the first wait before writes are retried after a failed
	// commit (default 250 ms).
	retryMin time.Duration
}

func (o *Options) fill() {
	if o.CacheBytes <= 0 {
		o.CacheBytes = 64 << 20
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = 16 << 20
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1024
	}
	if o.MaxScan <= 0 {
		o.MaxScan = 200_000
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.wrapBatch == nil {
		o.wrapBatch = func(_ *nostr.Event, b batchRW) batchRW { return b }
	}
	if o.retryMin <= 0 {
		o.retryMin = 250 * time.Millisecond
	}
	if o.compactEvery <= 0 {
		o.compactEvery = 5 * time.Second
	}
}

// Store is a Pebble-backed event store.
type Store struct {
	dir  string
	po   *pebble.Options
	opts Options

	// dbMu guards db, which a failed commit replaces (see recover): reads
	// hold it shared for as long as they use db.
	dbMu sync.RWMutex
	db   *pebble.DB
	// rec holds the event records (records.go); its reads need no lock
	// beyond an epoch, its writes belong to the writer.
	rec *recordLog
	// gc is the writer's compaction in progress (recordgc.go).
	gc gcState
	// fatal is where Pebble reports a commit it could not complete; failed
	// and retryAt (the writer's) stop writes after one, until a reopen.
	fatal   *fatalSlot
	failed  error
	retryAt time.Time
	backoff time.Duration
	// boundAt is when the writer next measures its disk use, used what it
	// measured last (bound.go).
	boundAt time.Time
	used    uint64

	writes  chan *saveReq
	deletes chan *deleteReq
	// compactReq asks the writer for every compaction step there is work
	// for now, and is answered by closing the channel sent (tests).
	compactReq chan chan struct{}
	stop       chan struct{}
	done       chan struct{}

	mu     sync.RWMutex // guards closed against Save racing Close
	closed bool

	// known and loaded belong to the writer goroutine. known holds the ids
	// written since Open at first; once the loader has read the ids already
	// on disk they join it and loaded becomes nil, and from then on a save
	// whose id known has never seen skips its point reads.
	known       *knownIDs
	loaded      chan loadResult // the loader's result; nil once merged
	loaderDone  chan struct{}
	knownLoaded chan struct{} // closed when loaded becomes nil; for tests
}

type saveReq struct {
	ev   *nostr.Event
	res  Result
	err  error
	done chan struct{}
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	opts.fill()
	fatal := &fatalSlot{}
	po := &pebble.Options{
		Cache:        pebble.NewCache(opts.CacheBytes),
		MemTableSize: opts.MemTableBytes,
		Logger:       pebbleLogger{opts.Logger, fatal},
		FS:           opts.fs,
	}
	if opts.MaxOpenFiles > 0 {
		po.MaxOpenFiles = max(1, opts.MaxOpenFiles-recordFiles)
	}
	if po.FS == nil {
		po.FS = vfs.Default
	}
	// Every save looks up keys that are almost never there (the new
	// event's id, its NIP-09 tombstone). Pebble has no filters unless
	// asked; a 10-bit Bloom filter per table (about 1 % false positives,
	// RocksDB's and CockroachDB's choice) lets such a miss skip a table
	// without reading its index and data blocks.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// A relay's store takes a steady stream of small writes whose index
	// keys (ids, tag hashes, authors) land all over the key space, so each
	// L0 → Lbase compaction rewrites most of Lbase. A threshold of 8, not
	// Pebble's 4, lets 4 flushed memtables gather in L0 before that
	// compaction instead of 2 (Pebble compacts L0 once 2 × sublevels
	// reaches the threshold), so Lbase is rewritten half as often
	// (docs/benchmarks/profile.md, "L0 compaction threshold"). Reads pay
	// little: saves skip their point reads through the id filter, and a
	// query merges at most 2 more L0 sublevels.
	po.L0CompactionThreshold = 8
	po.L0StopWritesThreshold = 24
	db, err := pebble.Open(dir, po)
	if err != nil {
		po.Cache.Unref()
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	s := &Store{
		dir:         dir,
		po:          po,
		fatal:       fatal,
		db:          db,
		opts:        opts,
		writes:      make(chan *saveReq, opts.MaxBatch),
		deletes:     make(chan *deleteReq),
		compactReq:  make(chan chan struct{}),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		known:       newKnownIDs(),
		loaded:      make(chan loadResult, 1),
		loaderDone:  make(chan struct{}),
		knownLoaded: make(chan struct{}),
	}
	fail := func(err error) (*Store, error) {
		if s.rec != nil {
			s.rec.close()
		}
		db.Close()
		po.Cache.Unref()
		return nil, err
	}
	haveTail, seg, off, err := readTail(db)
	if err != nil {
		return fail(err)
	}
	seals, err := readSeals(db)
	if err != nil {
		return fail(err)
	}
	if s.rec, err = openRecordLog(po.FS, dir, opts.segmentBytes, haveTail, seg, off, seals); err != nil {
		return fail(err)
	}
	if err := migrate(s, opts.Logger.Info); err != nil {
		return fail(err)
	}
	next, err := s.lastSerial()
	if err != nil {
		return fail(err)
	}
	its, err := openLoadIters(db)
	if err != nil {
		return fail(err)
	}
	go s.loadKnown(its)
	go s.writer(next + 1)
	return s, nil
}

// loadResult is what the loader read from the store as it was at Open.
type loadResult struct {
	known *knownIDs
	live  map[uint32]int64 // bytes of live record frames per segment
}

// loadKnown reads the ids already on disk for the writer's knownIDs, and
// the live bytes of each record segment for the compactor. Saves do not
// wait for it: until it is done they read as if it did not exist, and no
// segment is compacted.
func (s *Store) loadKnown(its loadIters) {
	defer close(s.loaderDone)
	k, err := loadKnownIDs(its.ids, s.stop)
	if err != nil {
		its.records.Close()
		if !errors.Is(err, ErrClosed) {
			s.opts.Logger.Warn("store: id filter not loaded; saves read every id from disk, and no record segment is compacted", "err", err)
		}
		return
	}
	live, err := loadLive(its.records, s.stop)
	if err != nil {
		if !errors.Is(err, ErrClosed) {
			s.opts.Logger.Warn("store: record segments not counted; none is compacted until a restart", "err", err)
		}
	}
	s.loaded <- loadResult{k, live}
}

func (s *Store) lastSerial() (uint64, error) {
	if s.db == nil {
		return 0, errNoDB
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pEvent}, UpperBound: []byte{pEvent + 1}})
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	return binary.BigEndian.Uint64(it.Key()[1:]), nil
}

// Save stores an event durably, applying its kind's storage rules. The
// event's signature must already have been verified. When Save returns
// Stored or Duplicate with a nil error, the event is on disk.
func (s *Store) Save(ctx context.Context, ev *nostr.Event) (Result, error) {
	req := &saveReq{ev: ev, done: make(chan struct{})}
	if err := toWriter(ctx, s, s.writes, req, req.done); err != nil {
		return 0, err
	}
	return req.res, req.err
}

// toWriter hands req to the writer goroutine on ch and waits until done
// is closed. A caller whose ctx ends stops waiting, but what the writer
// took may still commit.
func toWriter[R any](ctx context.Context, s *Store, ch chan<- R, req R, done <-chan struct{}) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	select {
	case ch <- req:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes every accepted save and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	<-s.loaderDone // its iterators must be closed before the database
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	defer s.po.Cache.Unref()
	rerr := s.rec.close()
	if s.db == nil {
		return errors.Join(errNoDB, rerr)
	}
	return errors.Join(s.db.Close(), rerr)
}

func (s *Store) writer(serial uint64) {
	defer close(s.done)
	sweep := time.NewTicker(s.opts.SweepEvery)
	defer sweep.Stop()
	compact := time.NewTicker(s.opts.compactEvery)
	defer compact.Stop()
	pending := make([]*saveReq, 0, s.opts.MaxBatch)
	for {
		var first *saveReq
		select {
		case first = <-s.writes:
		case k := <-s.loaded:
			s.known.merge(k.known)
			if k.live != nil {
				s.rec.loaded(k.live)
			}
			s.loaded = nil
			close(s.knownLoaded)
			continue
		case <-compact.C:
			s.compactRound()
			continue
		case done := <-s.compactReq:
			for {
				more, err := s.compactOnce()
				if err != nil {
					s.opts.Logger.Error("store: compacting record segments", "err", err)
				}
				if err != nil || !more {
					break
				}
			}
			close(done)
			continue
		case <-sweep.C:
			if err := s.sweepExpired(); err != nil {
				s.opts.Logger.Error("store: expiration sweep failed", "err", err)
			}
			continue
		case d := <-s.deletes:
			s.delete(d)
			continue
		case <-s.stop:
			// Drain what Save and Delete calls already handed over before
			// closing.
			for {
				select {
				case r := <-s.writes:
					serial = s.commit(append(pending[:0], r), serial)
				case d := <-s.deletes:
					s.delete(d)
				default:
					return
				}
			}
		}
		pending = append(pending[:0], first)
	gather:
		for len(pending) < s.opts.MaxBatch {
			select {
			case r := <-s.writes:
				pending = append(pending, r)
			default:
				break gather
			}
		}
		serial = s.commit(pending, serial)
	}
}

// commit applies a group of saves in one batch and one fsync. Each save is
// all or nothing: apply sets a save's keys into the shared batch one by one,
// so a save that fails part way has left some of them there, and the batch
// is rebuilt from the start without it (apply is deterministic given the
// disk and the serial, so the saves that succeed get the same answer again).
// Each round drops at least one save, so it ends.
func (s *Store) commit(reqs []*saveReq, serial uint64) uint64 {
	now := s.opts.Now().Unix()
	start := serial
	live := reqs
	for len(live) > 0 {
		if err := s.writable(); err != nil {
			for _, r := range live {
				r.err = err
			}
			break
		}
		b := s.db.NewIndexedBatch()
		serial = start
		ok := live[:0:0]
		for _, r := range live {
			r.res, r.err = s.apply(s.opts.wrapBatch(r.ev, b), r.ev, &serial, now)
			if r.err != nil {
				r.err = fmt.Errorf("store: save %s: %w", r.ev.IDHex(), r.err)
				continue
			}
			ok = append(ok, r)
		}
		if len(ok) < len(live) {
			b.Close()
			s.rec.abort()
			live = ok
			continue
		}
		// A group that writes nothing (duplicates, superseded) is
		// answered even at the bound.
		if !b.Empty() {
			if err := s.checkBound(); err != nil {
				b.Close()
				s.rec.abort()
				serial = start
				for _, r := range live {
					r.err = err
				}
				break
			}
		}
		err := s.commitBatch(b)
		b.Close()
		if err != nil {
			serial = s.recover(err)
			for _, r := range live {
				r.err = err
			}
		}
		break
	}
	for _, r := range reqs {
		close(r.done)
	}
	return serial
}

func (s *Store) apply(b batchRW, ev *nostr.Event, serial *uint64, now int64) (Result, error) {
	if exp, ok := ev.Expiration(); ok && exp <= now {
		return Expired, nil
	}
	if s.loaded != nil || s.known.mayHave(&ev.ID) { // not complete yet, or maybe seen
		if has, err := exists(b, idKey(ev.ID)); err != nil || has {
			return Duplicate, err
		}
		if gone, err := exists(b, deletedIDKey(ev.ID, ev.PubKey)); err != nil || gone {
			if err != nil {
				return 0, err
			}
			return Deleted, nil
		}
	}
	if slot := slotOf(pReplace, ev); slot != nil {
		if upTo, err := get(b, slotOf(pDeletedAdr, ev)); err != nil {
			return 0, err
		} else if upTo != nil && ev.CreatedAt <= int64(binary.BigEndian.Uint64(upTo)) {
			return Deleted, nil
		}
		cur, err := get(b, slot)
		if err != nil {
			return 0, err
		}
		if cur != nil {
			curSerial := binary.BigEndian.Uint64(cur)
			old, err := s.loadFrom(b, curSerial)
			if err != nil {
				return 0, err
			}
			// NIP-01: the newest wins; on a tie, the lowest id.
			if old.CreatedAt > ev.CreatedAt || (old.CreatedAt == ev.CreatedAt && bytes.Compare(old.ID[:], ev.ID[:]) < 0) {
				return Superseded, nil
			}
			if err := s.remove(b, old, curSerial); err != nil {
				return 0, err
			}
		}
	}
	n := *serial
	*serial++
	sk := u64(nil, n)
	lc, err := s.rec.add(n, encodeEvent(nil, ev))
	if err != nil {
		return 0, err
	}
	if err := setKeys(b, ev, n, lc); err != nil {
		return 0, err
	}
	s.known.add(&ev.ID)
	if slot := slotOf(pReplace, ev); slot != nil {
		if err := b.Set(slot, sk, nil); err != nil {
			return 0, err
		}
	}
	if ev.Kind == nostr.KindDeletion {
		if err := s.applyDeletion(b, ev); err != nil {
			return 0, err
		}
	}
	return Stored, nil
}

// setKeys writes event ev's E, I and index keys, for serial and its
// record at lc: a save's, a migration's, or a compaction's that moved the
// record. Every key a query reads holds lc, so a query reads the record
// with no lookup of E (see the package doc).
func setKeys(b interface {
	Set(key, value []byte, opts *pebble.WriteOptions) error
}, ev *nostr.Event, serial uint64, lc loc) error {
	v := lc.bytes()
	if err := b.Set(eventKey(serial), v, nil); err != nil {
		return err
	}
	if err := b.Set(idKey(ev.ID), append(u64(nil, serial), v...), nil); err != nil {
		return err
	}
	for _, k := range indexKeys(ev, serial) {
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
	}
	return nil
}

// applyDeletion carries out a NIP-09 deletion request: it removes the
// author's own events named by "e" tags and addresses named by "a" tags,
// and leaves tombstones so that the deleted events are refused if they
// arrive again. Deleting a deletion request has no effect.
func (s *Store) applyDeletion(b batchRW, del *nostr.Event) error {
	for _, t := range del.Tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "e":
			var id [32]byte
			if nostr.DecodeHex(id[:], t[1]) != nil {
				continue
			}
			if err := b.Set(deletedIDKey(id, del.PubKey), nil, nil); err != nil {
				return err
			}
			s.known.add(&id)
			sk, err := get(b, idKey(id))
			if err != nil || sk == nil {
				if err != nil {
					return err
				}
				continue
			}
			serial := binary.BigEndian.Uint64(sk)
			old, err := s.loadFrom(b, serial)
			if err != nil {
				return err
			}
			if old.PubKey == del.PubKey && old.Kind != nostr.KindDeletion {
				if err := s.remove(b, old, serial); err != nil {
					return err
				}
			}
		case "a":
			kind, pub, d, ok := parseAddress(t[1])
			if !ok || pub != del.PubKey {
				continue
			}
			fkey := addressKey(pDeletedAdr, pub, kind, d)
			prev, err := get(b, fkey)
			if err != nil {
				return err
			}
			if prev == nil || int64(binary.BigEndian.Uint64(prev)) < del.CreatedAt {
				if err := b.Set(fkey, u64(nil, uint64(del.CreatedAt)), nil); err != nil {
					return err
				}
			}
			sk, err := get(b, addressKey(pReplace, pub, kind, d))
			if err != nil || sk == nil {
				if err != nil {
					return err
				}
				continue
			}
			serial := binary.BigEndian.Uint64(sk)
			old, err := s.loadFrom(b, serial)
			if err != nil {
				return err
			}
			if old.CreatedAt <= del.CreatedAt {
				if err := s.remove(b, old, serial); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// parseAddress parses an "a" tag value kind:pubkey:d.
func parseAddress(a string) (kind int, pub [32]byte, d string, ok bool) {
	ks, rest, ok1 := strings.Cut(a, ":")
	ps, d, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return 0, pub, "", false
	}
	k, err := strconv.Atoi(ks)
	if err != nil || k < 0 || k > nostr.MaxKind || nostr.DecodeHex(pub[:], ps) != nil {
		return 0, pub, "", false
	}
	if nostr.ClassOf(k) == nostr.Replaceable {
		d = ""
	}
	return k, pub, d, true
}

// remove deletes an event and every key that points at it.
func (s *Store) remove(b batchRW, ev *nostr.Event, serial uint64) error {
	v, err := get(b, eventKey(serial))
	if err != nil {
		return err
	}
	if err := b.Delete(eventKey(serial), nil); err != nil {
		return err
	}
	if lc, ok := parseLoc(v); ok {
		s.rec.dropped(lc)
	}
	if err := b.Delete(idKey(ev.ID), nil); err != nil {
		return err
	}
	for _, k := range indexKeys(ev, serial) {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	if slot := slotOf(pReplace, ev); slot != nil {
		cur, err := get(b, slot)
		if err != nil {
			return err
		}
		if cur != nil && binary.BigEndian.Uint64(cur) == serial {
			return b.Delete(slot, nil)
		}
	}
	return nil
}

// sweepExpired removes events whose NIP-40 expiration has passed.
func (s *Store) sweepExpired() error {
	if s.db == nil {
		return errNoDB
	}
	now := s.opts.Now().Unix()
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{pExpiry},
		UpperBound: u64([]byte{pExpiry}, uint64(now)+1),
	})
	if err != nil {
		return err
	}
	var serials []uint64
	for ok := it.First(); ok && len(serials) < s.opts.MaxBatch*16; ok = it.Next() {
		serials = append(serials, binary.BigEndian.Uint64(it.Key()[9:]))
	}
	if err := it.Close(); err != nil {
		return err
	}
	if len(serials) == 0 {
		return nil
	}
	b := s.db.NewIndexedBatch()
	defer b.Close()
	defer s.rec.abort()
	for _, serial := range serials {
		ev, err := s.loadFrom(b, serial)
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := s.remove(b, ev, serial); err != nil {
			return err
		}
	}
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.commitBatch(b); err != nil {
		s.recover(err)
		return err
	}
	return nil
}

func get(r batchRW, key []byte) ([]byte, error) {
	v, c, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(v)
	c.Close()
	return out, nil
}

// exists reports whether key is set, whatever its value (a tombstone's
// is empty).
func exists(r batchRW, key []byte) (bool, error) {
	_, c, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, c.Close()
}

// loadFrom reads event serial as the writer's batch r sees it: its
// record may be one the batch itself appended.
func (s *Store) loadFrom(r batchRW, serial uint64) (*nostr.Event, error) {
	v, err := get(r, eventKey(serial))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, pebble.ErrNotFound
	}
	lc, ok := parseLoc(v)
	if !ok {
		return nil, fmt.Errorf("%w: event %d's key holds %d bytes, not a location", errBadFrame, serial, len(v))
	}
	rec, err := s.rec.readPending(lc, serial)
	if err != nil {
		return nil, err
	}
	ev := new(nostr.Event)
	if err := decodeEvent(rec, ev); err != nil {
		return nil, err
	}
	return ev, nil
}
