package frontend

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/pgstore"
)

// Follower follows the shared store's change feed and hands each stored
// or broadcast event to the local relay (relay.Relay.Deliver), once and
// in commit order. pgstore's follower already resumes after a dropped
// connection from the last change it gave; Follower adds the restart
// when the feed was pruned past it (too far behind: it goes on from the
// head and says what it skipped) and keeps the position it reached.
type Follower struct {
	st      *pgstore.Store
	deliver func(ev *nostr.Event, seq uint64)
	log     *slog.Logger
	// pos is the last position handed on.
	pos uint64
}

// NewFollower makes a follower of st's feed from its current head: the
// events committed before are the stored answers' to give, not live
// ones. deliver is called from Run's goroutine.
func NewFollower(ctx context.Context, st *pgstore.Store, deliver func(ev *nostr.Event, seq uint64), log *slog.Logger) (*Follower, error) {
	head, err := st.Head(ctx)
	if err != nil {
		return nil, err
	}
	return &Follower{st: st, deliver: deliver, log: log, pos: head}, nil
}

// Run delivers the feed's changes until ctx ends or the store closes.
func (f *Follower) Run(ctx context.Context) {
	for ctx.Err() == nil {
		fl := f.st.Follow(ctx, f.pos)
		for c := range fl.C() {
			if c.Seq <= f.pos {
				continue
			}
			f.pos = c.Seq
			if c.Op != pgstore.OpStored && c.Op != pgstore.OpEphemeral {
				continue
			}
			ev, err := c.Event()
			if err != nil {
				f.log.Error("frontend: a change on the feed does not decode; skipped", "seq", c.Seq, "err", err)
				continue
			}
			f.deliver(ev, c.Seq)
		}
		err := fl.Err()
		switch {
		case errors.Is(err, pgstore.ErrFeedTruncated):
			head, herr := f.st.Head(ctx)
			if herr != nil {
				f.log.Warn("frontend: feed head", "err", herr)
				select {
				case <-ctx.Done():
				case <-time.After(RolePoll):
				}
				continue
			}
			f.log.Error("frontend: this front-end fell behind the feed's kept changes; live subscriptions miss the events between", "from", f.pos, "to", head)
			f.pos = head
		case err != nil:
			return // ctx ended or the store closed
		}
	}
}
