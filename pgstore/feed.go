package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"fleetmesh.org/fleetmesh/nostr"
)

// Op is what a change did.
type Op int

// Change operations.
const (
	// OpStored: an event was stored.
	OpStored Op = 1
	// OpRemoved: an event was removed (replaced, deleted by NIP-09 or by
	// Delete, or expired).
	OpRemoved Op = 2
	// OpEphemeral: an ephemeral event was broadcast; it was never stored.
	OpEphemeral Op = 3
)

func (o Op) String() string {
	switch o {
	case OpStored:
		return "stored"
	case OpRemoved:
		return "removed"
	case OpEphemeral:
		return "ephemeral"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Change is one entry of the feed.
type Change struct {
	// Seq is the change's sequence number: 1, 2, 3, ... in commit order.
	Seq uint64
	Op  Op
	// ID is the event's id.
	ID [32]byte
	// JSON is the event's NIP-01 JSON for OpStored and OpEphemeral, nil
	// for OpRemoved.
	JSON []byte
}

// Event decodes the change's event (OpStored, OpEphemeral).
func (c *Change) Event() (*nostr.Event, error) {
	if c.JSON == nil {
		return nil, fmt.Errorf("pgstore: change %d (%v) carries no event", c.Seq, c.Op)
	}
	ev := new(nostr.Event)
	if err := ev.UnmarshalJSON(c.JSON); err != nil {
		return nil, fmt.Errorf("pgstore: change %d: %w", c.Seq, err)
	}
	return ev, nil
}

// ErrFeedTruncated is returned to a reader of the feed whose position is
// older than the oldest change kept (Options.FeedKeep): it must start
// again from the stored events (QueryRawHead) and the head.
var ErrFeedTruncated = errors.New("pgstore: the feed no longer holds the changes after this position")

// feedChannel is the NOTIFY channel that wakes followers; its
// notifications carry nothing, the feed itself is the data.
const feedChannel = "fleetmesh_feed"

// changeList gathers a transaction's changes, in order.
type changeList struct {
	ops  []int16
	ids  [][]byte
	raws [][]byte
}

func (l *changeList) add(op Op, id, raw []byte) {
	l.ops = append(l.ops, int16(op))
	l.ids = append(l.ids, id)
	l.raws = append(l.raws, raw)
}
func (l *changeList) stored(id, raw []byte) { l.add(OpStored, id, raw) }
func (l *changeList) removed(id []byte)     { l.add(OpRemoved, id, nil) }

// appendSQL gives the transaction's changes the next sequence numbers. It
// updates the one row of feed_head, so the row lock it takes is held until
// the transaction ends: another writer's update waits for this commit, and
// sequence numbers are handed out in commit order with no gap (doc.go).
const appendSQL = `WITH h AS (
	UPDATE fleetmesh.feed_head SET seq = seq + $1 RETURNING seq
)
INSERT INTO fleetmesh.changes (seq, op, id, raw)
SELECT h.seq - $1 + c.ord, c.op, c.id, c.raw
FROM h, unnest($2::smallint[], $3::bytea[], $4::bytea[]) WITH ORDINALITY AS c(op, id, raw, ord)`

// commitChanges appends l to the feed, notifies the followers and commits
// the transaction open on conn, in one round trip, so that the feed's row
// lock is held for no more than the commit itself. A list with nothing in
// it only commits.
func (s *Store) commitChanges(ctx context.Context, conn *pgxpool.Conn, l *changeList) error {
	b := &pgx.Batch{}
	if len(l.ops) > 0 {
		b.Queue(appendSQL, len(l.ops), l.ops, l.ids, l.raws)
		b.Queue("SELECT pg_notify($1, '')", feedChannel)
	}
	b.Queue("COMMIT")
	return conn.SendBatch(ctx, b).Close()
}

// Broadcast appends an ephemeral event to the feed, for the other
// front-ends' subscriptions, without storing it.
func (s *Store) Broadcast(ctx context.Context, ev *nostr.Event) error {
	if nostr.ClassOf(ev.Kind) != nostr.Ephemeral {
		return fmt.Errorf("pgstore: broadcast kind %d: only ephemeral events are broadcast; Save stores the others", ev.Kind)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: broadcast: %w", err)
	}
	defer conn.Release()
	var l changeList
	l.add(OpEphemeral, ev.ID[:], ev.AppendJSON(nil))
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("pgstore: broadcast: %w", err)
	}
	if err := s.commitChanges(ctx, conn, &l); err != nil {
		conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		return fmt.Errorf("pgstore: broadcast: %w", err)
	}
	return nil
}

// Head returns the sequence number of the last committed change (0 when
// there is none).
func (s *Store) Head(ctx context.Context) (uint64, error) {
	var h int64
	if err := s.retryConn(func() error {
		return s.pool.QueryRow(ctx, "SELECT seq FROM fleetmesh.feed_head").Scan(&h)
	}, func() bool { return true }); err != nil {
		return 0, fmt.Errorf("pgstore: feed head: %w", err)
	}
	return uint64(h), nil
}

// Changes returns the changes after position after, oldest first, at most
// limit of them: none when the feed has nothing newer.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]Change, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT seq, op, id, raw FROM fleetmesh.changes WHERE seq > $1 ORDER BY seq LIMIT $2", int64(after), limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read feed: %w", err)
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		var (
			seq     int64
			op      int16
			id, raw []byte
		)
		if err := rows.Scan(&seq, &op, &id, &raw); err != nil {
			return nil, fmt.Errorf("pgstore: read feed: %w", err)
		}
		if len(id) != 32 {
			return nil, fmt.Errorf("pgstore: feed change %d has a %d-byte id", seq, len(id))
		}
		c := Change{Seq: uint64(seq), Op: Op(op), ID: [32]byte(id), JSON: raw}
		// Sequence numbers have no gap, so a first change past after+1
		// means the ones between were pruned.
		if len(out) == 0 && c.Seq != after+1 {
			return nil, fmt.Errorf("%w: position %d, oldest kept %d", ErrFeedTruncated, after, c.Seq)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: read feed: %w", err)
	}
	return out, nil
}

// pruneFeed drops all but the newest FeedKeep changes.
func (s *Store) pruneFeed(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM fleetmesh.changes WHERE seq <= (SELECT seq FROM fleetmesh.feed_head) - $1", int64(s.opts.FeedKeep))
	return err
}

// Follower reads the feed from a position on, for as long as its context
// lasts.
type Follower struct {
	c   chan Change
	err error
}

// C delivers the changes in sequence order, each once. It is closed when
// the follower stops; Err then says why.
func (f *Follower) C() <-chan Change { return f.c }

// Err is why the follower stopped (its context's error, ErrClosed or
// ErrFeedTruncated); nil while C is open.
func (f *Follower) Err() error { return f.err }

// Follow starts a follower that delivers every change after position
// after, oldest first, and then each new one as it commits: woken by
// NOTIFY, and reading the feed every Options.FeedPoll whatever it hears
// (Options.FeedPollListening while the listener is connected), so a
// notification lost while the listener reconnects costs at most a poll's
// delay. A read that fails (a dropped connection) is retried from
// the last change delivered, so nothing is lost or repeated. A slow
// reader of C holds back only its own follower.
func (s *Store) Follow(ctx context.Context, after uint64) *Follower {
	s.listen.Do(func() {
		s.wg.Add(1)
		go s.listener()
	})
	f := &Follower{c: make(chan Change, s.opts.FeedBuffer)}
	go s.follow(ctx, f, after)
	return f
}

func (s *Store) follow(ctx context.Context, f *Follower, last uint64) {
	defer close(f.c)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.bg, cancel)
	defer stop()
	poll := time.NewTimer(s.opts.FeedPoll)
	defer poll.Stop()
	retry := 50 * time.Millisecond
	for {
		wake := s.wakeChan() // before reading, so no notification slips between
		cs, err := s.Changes(ctx, last, s.opts.FeedBatch)
		switch {
		case ctx.Err() != nil:
			f.err = ctx.Err()
			if s.closed() {
				f.err = ErrClosed
			}
			return
		case errors.Is(err, ErrFeedTruncated):
			f.err = err
			return
		case err != nil:
			s.opts.Logger.Warn("pgstore: reading the feed; retrying", "after", last, "err", err)
			wake = nil // wait for the retry, not the next notification
			poll.Reset(retry)
			retry = min(2*retry, s.opts.FeedPoll)
		default:
			retry = 50 * time.Millisecond
		deliver:
			for _, c := range cs {
				select {
				case f.c <- c:
					last = c.Seq
				case <-ctx.Done():
					break deliver
				}
			}
			if len(cs) == s.opts.FeedBatch {
				continue
			}
			poll.Reset(s.pollEvery())
		}
		select {
		case <-wake:
		case <-poll.C:
		case <-ctx.Done():
		}
	}
}

// pollEvery is how long a follower waits for a notification before it
// reads anyway: Options.FeedPoll while the listener is not connected,
// Options.FeedPollListening while it is (it then wakes the followers on
// every change and on its connection dropping or coming back). The
// manage lists pace themselves alike (ManageLists.Listening).
func (s *Store) pollEvery() time.Duration {
	if s.listening.Load() {
		return s.opts.FeedPollListening
	}
	return s.opts.FeedPoll
}

func (s *Store) wakeChan() chan struct{} {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	return s.wakeCh
}

// wake wakes every follower.
func (s *Store) wake() {
	s.wakeMu.Lock()
	close(s.wakeCh)
	s.wakeCh = make(chan struct{})
	s.wakeMu.Unlock()
}

// wakeLists wakes the watcher of the manage lists (ManageLists.Changed).
func (s *Store) wakeLists() {
	s.wakeMu.Lock()
	close(s.listsCh)
	s.listsCh = make(chan struct{})
	s.wakeMu.Unlock()
}

// listener holds one connection, outside the pool, that LISTENs on the
// feed's channel and the manage lists' and wakes the followers, or the
// lists' watcher, on each notification. When the connection drops it
// wakes them all anyway (a notification may have been lost) and connects
// again.
func (s *Store) listener() {
	defer s.wg.Done()
	ctx := s.bg
	retry := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, &retry)
		s.wake()
		s.wakeLists()
		if ctx.Err() != nil {
			return
		}
		s.opts.Logger.Warn("pgstore: feed listener lost its connection; reconnecting", "err", err)
		t := time.NewTimer(retry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		retry = min(2*retry, s.opts.FeedPoll)
	}
}

func (s *Store) listenOnce(ctx context.Context, retry *time.Duration) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+feedChannel+"; LISTEN "+manageChannel); err != nil {
		return err
	}
	s.listening.Store(true)
	defer s.listening.Store(false)
	*retry = 50 * time.Millisecond
	// Changes committed while no one listened are read now.
	s.wake()
	s.wakeLists()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == manageChannel {
			s.wakeLists()
		} else {
			s.wake()
		}
	}
}
