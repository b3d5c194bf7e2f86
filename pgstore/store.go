package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"fleetmesh.org/fleetmesh/eventstore"
)

// ErrClosed is returned by calls on a closed store.
var ErrClosed = errors.New("pgstore: closed")

// ErrFull is eventstore.ErrFull: a save refused at Options.MaxBytes.
var ErrFull = eventstore.ErrFull

// Options are the store's bounds. Zero values take the defaults.
type Options struct {
	// MaxConns bounds the connections of the store's pool (default 8).
	// Following the feed holds one more, outside the pool, for LISTEN.
	MaxConns int32
	// ReadURL, when set, is a streaming replica's connection string:
	// Query, QueryRaw, ListRaw, Count and QueryRawHead read it, with a
	// pool of MaxConns of its own, while saves, the feed and Head use the
	// primary. A replica lags its primary, so an event just saved may be
	// missing from a query answered there for that long; QueryRawHead's
	// head is the replica's, and following the primary's feed from it
	// still misses nothing and repeats nothing (doc.go).
	ReadURL string
	// MaxBatch is how many saves one transaction gathers at most
	// (default 256; writer.go).
	MaxBatch int
	// Writers is how many transactions of saves the store runs at once
	// (default 2), so that one batch's checks overlap another's commit.
	Writers int
	// MaxBytes bounds the database's size (0: no bound): once the size
	// last measured (every SweepEvery) reaches it, saves fail with ErrFull.
	MaxBytes uint64
	// MaxScan bounds how many events Count counts (default 200,000),
	// as the Pebble store's scan bound does.
	MaxScan int
	// SweepEvery is how often expired events are removed, the feed is
	// pruned and the database's size is measured (default 1 min).
	SweepEvery time.Duration
	// FeedKeep is how many of the newest changes the feed keeps (default
	// 1,000,000); a follower further behind gets ErrFeedTruncated.
	FeedKeep uint64
	// FeedPoll is how often a follower reads the feed when no NOTIFY has
	// woken it while the store's listener is not connected (default 1
	// s): the floor under a notification lost then.
	FeedPoll time.Duration
	// FeedPollListening is the same while the listener is connected
	// (default 15 s; never shorter than FeedPoll). Then every change made
	// through a store wakes the followers, and so does the listener's
	// connection dropping or coming back, so this poll only bounds the
	// delay of a change written without NOTIFY (by hand, in SQL); it is
	// what an idle front-end spends its CPU on.
	FeedPollListening time.Duration
	// FeedBatch is how many changes one read of the feed returns at most
	// (default 512).
	FeedBatch int
	// FeedBuffer is the length of a follower's channel (default 256).
	FeedBuffer int
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
	// Logger receives the sweeper's and the listener's messages (default:
	// discard).
	Logger *slog.Logger
}

func (o *Options) fill() {
	if o.MaxConns <= 0 {
		o.MaxConns = 8
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Writers <= 0 {
		o.Writers = 2
	}
	if o.MaxScan <= 0 {
		o.MaxScan = 200_000
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Minute
	}
	if o.FeedKeep == 0 {
		o.FeedKeep = 1_000_000
	}
	if o.FeedPoll <= 0 {
		o.FeedPoll = time.Second
	}
	if o.FeedPollListening <= 0 {
		o.FeedPollListening = 15 * time.Second
	}
	o.FeedPollListening = max(o.FeedPollListening, o.FeedPoll)
	if o.FeedBatch <= 0 {
		o.FeedBatch = 512
	}
	if o.FeedBuffer <= 0 {
		o.FeedBuffer = 256
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is an event store in a PostgreSQL database, shared by every
// process that opens the same database.
type Store struct {
	pool *pgxpool.Pool
	// read is the pool queries use: a replica's (Options.ReadURL), or pool.
	read *pgxpool.Pool
	opts Options

	// writes carries saves to the writers. Save sends on it only under
	// mu held shared and while !isClosed, so that once Close has set
	// isClosed the writers find every accepted save queued.
	writes   chan *saveReq
	mu       sync.RWMutex
	isClosed bool

	// size is the database's size in bytes as last measured.
	size atomic.Uint64

	wakeMu  sync.Mutex
	wakeCh  chan struct{} // closed and replaced on each feed notification
	listsCh chan struct{} // closed and replaced on each notification of the manage lists
	listen  sync.Once     // starts the listener on the first Follow or ManageLists.Changed
	// listening is whether the listener's connection is LISTENing now
	// (pollEvery).
	listening atomic.Bool

	// bg is cancelled by Close; the sweeper and the listener run under
	// it, and every follower stops with it.
	bg        context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Open connects to the database at url (a PostgreSQL connection string,
// postgres://user@host/db or key=value form), brings its schema up to
// date and starts the store's sweeper. Many processes may Open the same
// database at once: the schema is migrated by one of them.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	opts.fill()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: postgres_url: %w", err)
	}
	cfg.MaxConns = opts.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	n, err := migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	read := pool
	if opts.ReadURL != "" {
		rcfg, err := pgxpool.ParseConfig(opts.ReadURL)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("pgstore: the replica's connection string: %w", err)
		}
		rcfg.MaxConns = opts.MaxConns
		if read, err = pgxpool.NewWithConfig(ctx, rcfg); err != nil {
			pool.Close()
			return nil, fmt.Errorf("pgstore: replica: %w", err)
		}
	}
	if n > 0 {
		opts.Logger.Info("pgstore: schema migrated", "applied", n, "version", SchemaVersion())
	}
	s := &Store{pool: pool, read: read, opts: opts, wakeCh: make(chan struct{}), listsCh: make(chan struct{}), writes: make(chan *saveReq, opts.MaxBatch)}
	s.bg, s.cancel = context.WithCancel(context.Background())
	s.measure(ctx)
	s.wg.Add(1 + opts.Writers)
	go s.sweeper()
	for range opts.Writers {
		go s.writer()
	}
	return s, nil
}

// Close commits every save already accepted, stops the store's goroutines
// (followers end with ErrClosed) and closes its connections.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.isClosed = true
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
		if s.read != s.pool {
			s.read.Close()
		}
		s.pool.Close()
	})
	return nil
}

func (s *Store) closed() bool { return s.bg.Err() != nil }

// DiskBytes is the database's size on disk as last measured (every
// Options.SweepEvery).
func (s *Store) DiskBytes() uint64 { return s.size.Load() }

// MaxBytes is the bound on DiskBytes past which saves fail (0: none).
func (s *Store) MaxBytes() uint64 { return s.opts.MaxBytes }

// measure reads the database's size.
func (s *Store) measure(ctx context.Context) {
	var n int64
	if err := s.pool.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&n); err != nil {
		s.opts.Logger.Warn("pgstore: measuring the database's size", "err", err)
		return
	}
	s.size.Store(uint64(max(n, 0)))
}

// sweeper removes expired events, prunes the feed and measures the
// database, every SweepEvery, until Close.
func (s *Store) sweeper() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.SweepEvery)
	defer t.Stop()
	ctx := s.bg
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Error("pgstore: expiration sweep failed", "err", err)
		}
		if err := s.pruneFeed(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Error("pgstore: pruning the feed failed", "err", err)
		}
		s.measure(ctx)
	}
}
