package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"fleetmesh.org/fleetmesh/eventstore"
)

// ErrWritesStopped is returned by Save after a commit failed on disk (a
// full disk, an I/O error): the store stays readable and refuses writes
// until it has reopened its database cleanly.
var ErrWritesStopped = eventstore.ErrWritesStopped

// errNoDB is returned by reads when even a read-only reopen failed.
var errNoDB = errors.New("store: database could not be reopened after a failed commit")

// batchRW is what a save needs of the shared batch: reads that see the
// batch's own earlier writes, and writes. *pebble.Batch (indexed) is the
// one the store uses; tests wrap it to fail a save at a chosen step.
type batchRW interface {
	Get(key []byte) ([]byte, io.Closer, error)
	Set(key, value []byte, opts *pebble.WriteOptions) error
	Delete(key []byte, opts *pebble.WriteOptions) error
}

// fatalSlot holds the first commit failure Pebble reported through its
// logger's Fatalf.
type fatalSlot struct {
	mu  sync.Mutex
	err error
}

func (f *fatalSlot) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *fatalSlot) take() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}

// commitBatch commits b with one fsync. Pebble treats a failed WAL write or
// sync as fatal: it calls its logger's Fatalf and then returns nil from
// Commit. The store's logger records that failure instead of ending the
// process (a full disk must become a refused write, not a crash), and it
// is returned here.
//
// The records the batch appended are written and synced first, and the
// batch carries the records' new tail: when it commits, every location it
// holds is on disk (records.go).
func (s *Store) commitBatch(b *pebble.Batch) error {
	err := s.rec.prepare(b)
	if err == nil {
		err = s.rec.flush()
	}
	if err == nil {
		err = b.Commit(pebble.Sync)
		if ferr := s.fatal.take(); ferr != nil {
			err = ferr
		}
	}
	if err != nil {
		s.rec.abort()
		return fmt.Errorf("%w: %w", ErrWritesStopped, err)
	}
	s.rec.committed()
	s.backoff = 0
	return nil
}

// writable says whether the writer may commit: after a failure it first
// reopens the database read-write, at most once per backoff step.
func (s *Store) writable() error {
	if s.failed == nil {
		return nil
	}
	if time.Now().Before(s.retryAt) {
		return s.failed
	}
	if err := s.reopen(); err != nil {
		s.failed = fmt.Errorf("%w: reopen: %w", ErrWritesStopped, err)
		s.stepBackoff()
		return s.failed
	}
	s.failed = nil
	return nil
}

func (s *Store) stepBackoff() {
	s.backoff = min(max(2*s.backoff, s.opts.retryMin), 30*time.Second)
	s.retryAt = time.Now().Add(s.backoff)
}

// recover handles a failed commit: Pebble has applied the batch to its
// memtable though it is not on disk, so the database is closed and opened
// again from what is on disk (read-only if a read-write open fails, so
// reads go on). Writes stay stopped for a backoff step. It returns the
// next serial.
func (s *Store) recover(cause error) uint64 {
	s.failed = cause
	s.stepBackoff()
	s.opts.Logger.Error("store: commit failed; writes stopped, reads go on", "err", cause)
	if err := s.reopen(); err != nil {
		s.opts.Logger.Error("store: reopen after a failed commit", "err", err)
	}
	next, err := s.lastSerial()
	if err != nil {
		s.opts.Logger.Error("store: reading the last serial after reopen", "err", err)
	}
	return next + 1
}

// reopen replaces the database with a fresh open of the same directory,
// read-only if a read-write open fails (a full disk has no room for a new
// WAL), so that reads go on. The id loader's iterators belong to the old
// database, so it waits for them.
func (s *Store) reopen() error {
	<-s.loaderDone
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			s.opts.Logger.Warn("store: closing the failed database", "err", err)
		}
	}
	db, err := pebble.Open(s.dir, s.po)
	if err != nil {
		ro := s.po.Clone()
		ro.ReadOnly = true
		s.db, _ = pebble.Open(s.dir, ro) // nil if even that fails: see errNoDB
		return err
	}
	s.db = db
	// The failed batch's records are not committed: writes go on from
	// the tail the database holds.
	haveTail, seg, off, err := readTail(db)
	if err != nil {
		return err
	}
	s.rec.reset(haveTail, seg, off)
	return nil
}

type pebbleLogger struct {
	l     *slog.Logger
	fatal *fatalSlot
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf("pebble: "+format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf("pebble: "+format, args...))
}

// Fatalf records a failed commit (see commitBatch) and panics on anything
// else: those are broken invariants, where going on could corrupt data.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble: fatal: " + msg)
	if strings.HasPrefix(msg, "pebble: fatal commit error") {
		p.fatal.set(errors.New(msg))
		return
	}
	panic(msg)
}
