package node

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"fleetmesh.org/fleetmesh/frontend"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/pgstore"
	"fleetmesh.org/fleetmesh/relay"
)

// storeOpenTimeout bounds connecting to PostgreSQL and migrating its
// schema as a front-end starts.
const storeOpenTimeout = time.Minute

// ErrRoleChanged is what Serve returns when this front-end took the
// node's mesh role, or lost it: the caller opens the node again, with
// Options.MeshRole set to TakenRole, and it runs with or without its mesh
// side accordingly. Its clients reconnect.
var ErrRoleChanged = errors.New("node: the mesh role changed hands; reopening the front-end")

// frontEndPart is what a node whose store is PostgreSQL adds: it follows
// the store's change feed into the relay, registers in the members
// table, and holds the mesh role or waits for it (package frontend).
type frontEndPart struct {
	pg       *pgstore.Store
	url      string
	name     string
	key      int64
	members  *frontend.Members
	follower *frontend.Follower
	log      *slog.Logger
	// role is the mesh role when this front-end holds it, else nil;
	// taken is the role taken while serving, for the next Open.
	role  *frontend.Role
	taken *frontend.Role
	// standing is the node's standing view as the role's holder last
	// shared it; kept fresh only at a front-end without the role.
	standing sharedStanding

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openFrontEnd registers the front-end, hooks the feed into rl and takes
// the mesh role if it is free (or uses the one Options.MeshRole hands
// over).
func openFrontEnd(opts Options, pg *pgstore.Store, rl *relay.Relay, listen string) (_ *frontEndPart, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	defer cancel()
	fe := &frontEndPart{pg: pg, url: opts.Config.Store.PostgresURL, name: frontend.Name(listen), key: frontend.RoleLockKey(opts.Key.DID()), log: opts.Log}
	defer func() {
		if err != nil {
			fe.close()
		}
	}()
	fe.role = opts.MeshRole
	if fe.role == nil {
		if fe.role, err = frontend.TryRole(ctx, fe.url, fe.key, fe.name); err != nil {
			return nil, err
		}
	}
	fe.members, err = frontend.Join(ctx, fe.url, opts.Key.DID(), fe.key, frontend.Member{Name: fe.name, RelayURL: rl.Config().URL, Version: opts.Version}, opts.Log)
	if err != nil {
		return nil, err
	}
	if err := fe.members.HoldsRole(ctx, fe.role); err != nil {
		return nil, err
	}
	rl.FeedHead = pg.Head
	rl.Broadcast = pg.Broadcast
	fe.follower, err = frontend.NewFollower(ctx, pg, rl.Deliver, opts.Log)
	if err != nil {
		return nil, err
	}
	if fe.role != nil {
		opts.Log.Info("front-end holds the mesh role", "front_end", fe.name)
	} else {
		opts.Log.Info("front-end without the mesh role; waiting for it", "front_end", fe.name)
		fe.standing.refresh(ctx, fe.members, opts.Log)
	}
	return fe, nil
}

// sharedStanding is the node's standing view as the front-end holding
// the mesh role shared it (frontend.Members.ShareStanding): what a
// front-end without the role, which has no receipts of its own, weighs
// labellers by (standing.Reader).
type sharedStanding struct {
	scores atomic.Pointer[map[string]float64]
	taken  time.Time // of scores; only refresh touches it
}

// Of is did's standing as last shared.
func (s *sharedStanding) Of(did string) float64 {
	if m := s.scores.Load(); m != nil {
		return (*m)[did]
	}
	return 0
}

// refresh reads the view if it was shared again since the last read.
func (s *sharedStanding) refresh(ctx context.Context, m *frontend.Members, log *slog.Logger) {
	scores, taken, err := m.SharedStanding(ctx, s.taken)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("front-end: reading the shared standing view", "err", err)
		}
		return
	}
	if scores != nil {
		s.scores.Store(&scores)
		s.taken = taken
	}
}

// shareStanding is, at the front-end holding the mesh role, what the
// standing view's every take calls: it shares the scores when they
// changed since it last shared them.
func (fe *frontEndPart) shareStanding() func(map[string]float64) {
	var last map[string]float64
	return func(scores map[string]float64) {
		if last != nil && maps.Equal(last, scores) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := fe.members.ShareStanding(ctx, scores); err != nil {
			fe.log.Warn("front-end: sharing the standing view", "err", err)
			return
		}
		last = scores
	}
}

// start follows the feed and watches the role: roleChanged is called
// once when this front-end takes the role or loses it.
func (fe *frontEndPart) start(roleChanged func(), log func(msg string, args ...any)) {
	ctx, cancel := context.WithCancel(context.Background())
	fe.cancel = cancel
	fe.wg.Add(2)
	go func() {
		defer fe.wg.Done()
		fe.follower.Run(ctx)
	}()
	if fe.role == nil {
		fe.wg.Add(1)
		go func() {
			defer fe.wg.Done()
			periodic.Run(ctx, frontend.Heartbeat, frontend.Heartbeat, nil, func() { fe.standing.refresh(ctx, fe.members, fe.log) })
		}()
	}
	go func() {
		defer fe.wg.Done()
		if fe.role != nil {
			select {
			case <-fe.role.Lost():
				log("front-end lost the mesh role (its database session ended)", "front_end", fe.name)
				roleChanged()
			case <-ctx.Done():
			}
			return
		}
		r, err := frontend.WaitRole(ctx, fe.url, fe.key, fe.name, func(err error) { log("front-end: asking for the mesh role", "err", err) })
		if err != nil {
			return
		}
		fe.taken = r
		log("front-end took the mesh role; reopening with the mesh side", "front_end", fe.name)
		roleChanged()
	}()
}

// members lists the node's front-ends.
func (fe *frontEndPart) list(ctx context.Context) ([]frontend.Member, error) {
	return fe.members.List(ctx)
}

// close stops following and waiting, leaves the members table and gives
// up the role this Open held, but not one taken while serving, which
// TakenRole hands to the next Open.
func (fe *frontEndPart) close() error {
	if fe.cancel != nil {
		fe.cancel()
	}
	fe.wg.Wait()
	var errs []error
	if fe.members != nil {
		errs = append(errs, fe.members.Close())
	}
	if fe.role != nil {
		errs = append(errs, fe.role.Release())
	}
	return errors.Join(errs...)
}

// TakenRole is the mesh role this front-end took while serving, after
// Serve returned ErrRoleChanged; nil if it lost the role instead.
func (n *Node) TakenRole() *frontend.Role {
	if n.fe == nil {
		return nil
	}
	return n.fe.taken
}
