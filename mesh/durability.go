package mesh

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/mesh/placement"
)

// DurabilityConfig is how the mesh places and announces the share of the
// mesh's data a node holds for durability (spec/mesh-placement.md). Zero
// fields take the defaults of DefaultDurabilityConfig.
type DurabilityConfig struct {
	// Replication is R: how many storage nodes hold each shard.
	Replication int
	// PlacementDebounce is how long the mesh waits after the set of known
	// storage nodes changes before it recomputes the placement, so that a
	// burst of descriptors (a node joining and exchanging with everyone)
	// costs one recomputation.
	PlacementDebounce time.Duration
	// HolderProbes is how many dials in a row, HolderProbeInterval apart,
	// must fail before a storage node that dropped its connection or
	// failed a sync is judged down and left out of the placement until it
	// connects again (mesh/liveness.go).
	HolderProbes        int
	HolderProbeInterval time.Duration

	// ProvideQueue bounds the event CIDs waiting to be announced in the
	// DHT; beyond it new ones are dropped and counted.
	ProvideQueue int
	// ProvideBatch is how many CIDs one round announces at most.
	ProvideBatch int
	// ProvideInterval is the least time between the starts of two
	// rounds, so at most ProvideBatch CIDs are announced per interval.
	ProvideInterval time.Duration
	// ProvideConcurrency bounds the announcements of a round running at
	// once.
	ProvideConcurrency int
	// ProvideTimeout bounds one announcement.
	ProvideTimeout time.Duration
}

// DefaultDurabilityConfig returns the defaults: R = 3, at most 16
// announcements a second, 4096 waiting.
func DefaultDurabilityConfig() DurabilityConfig {
	return DurabilityConfig{
		Replication:         3,
		PlacementDebounce:   2 * time.Second,
		HolderProbes:        2,
		HolderProbeInterval: time.Second,
		ProvideQueue:        4096,
		ProvideBatch:        16,
		ProvideInterval:     time.Second,
		ProvideConcurrency:  4,
		ProvideTimeout:      30 * time.Second,
	}
}

func (c DurabilityConfig) withDefaults() DurabilityConfig {
	d := DefaultDurabilityConfig()
	setInt(&c.Replication, d.Replication)
	setDur(&c.PlacementDebounce, d.PlacementDebounce)
	setInt(&c.HolderProbes, d.HolderProbes)
	setDur(&c.HolderProbeInterval, d.HolderProbeInterval)
	setInt(&c.ProvideQueue, d.ProvideQueue)
	setInt(&c.ProvideBatch, d.ProvideBatch)
	setDur(&c.ProvideInterval, d.ProvideInterval)
	setInt(&c.ProvideConcurrency, d.ProvideConcurrency)
	setDur(&c.ProvideTimeout, d.ProvideTimeout)
	return c
}

func (c DurabilityConfig) validate() error {
	c = c.withDefaults()
	for _, p := range []struct {
		name string
		v    int64
	}{
		{"Replication", int64(c.Replication)},
		{"PlacementDebounce", int64(c.PlacementDebounce)},
		{"HolderProbes", int64(c.HolderProbes)},
		{"HolderProbeInterval", int64(c.HolderProbeInterval)},
		{"ProvideQueue", int64(c.ProvideQueue)},
		{"ProvideBatch", int64(c.ProvideBatch)},
		{"ProvideInterval", int64(c.ProvideInterval)},
		{"ProvideConcurrency", int64(c.ProvideConcurrency)},
		{"ProvideTimeout", int64(c.ProvideTimeout)},
	} {
		if p.v < 0 {
			return fmt.Errorf("mesh: Durability.%s is negative", p.name)
		}
	}
	if c.Replication > ShardCount {
		return fmt.Errorf("mesh: Durability.Replication %d is above %d", c.Replication, ShardCount)
	}
	return nil
}

// placer keeps this node's placement current: it recomputes it when the
// set of known storage nodes changes (debounced), and subscribes to the
// shards this node holds and leaves those it no longer holds.
type placer struct {
	m       *Mesh
	wake    chan struct{}
	changed chan struct{}

	mu  sync.Mutex
	cur placement.Placement
}

func newPlacer(m *Mesh) *placer {
	return &placer{m: m, wake: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
}

// poke asks for a recomputation; many pokes within the debounce interval
// cost one.
func (p *placer) poke() {
	if p == nil {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// placementMaxWait bounds, in debounce intervals, how long a steady
// stream of changes can put off a recomputation.
const placementMaxWait = 10

// run recomputes the placement once the set of storage nodes has been
// quiet for Durability.PlacementDebounce (and at most placementMaxWait
// debounce intervals after the first change), so that a node learning
// the mesh's descriptors in a burst, as a starting node does, places
// once, over what it learnt, instead of over each partial view. Nor does
// it place before its first descriptor exchange with a peer, unless
// placementMaxWait debounce intervals pass without one (it may be the
// first node of a mesh): alone, a node would hold every shard and start
// syncing them all.
func (p *placer) run(ctx context.Context) {
	started := time.Now()
	// Descriptors expire without any message announcing it: look again
	// every maintenance interval.
	tick := time.NewTicker(p.m.cfg.MaintainInterval)
	defer tick.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	var since time.Time // the first change not yet placed; zero if none
	arm := func() {
		if since.IsZero() {
			since = time.Now()
		}
		d := p.m.cfg.Durability.PlacementDebounce
		debounce.Reset(max(0, min(d, time.Until(since.Add(placementMaxWait*d)))))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
			arm()
		case <-tick.C:
			// A look for expired descriptors, not a change: it must not
			// put off a recomputation already due, or with a maintenance
			// interval shorter than the debounce every change would wait
			// placementMaxWait debounce intervals.
			if since.IsZero() {
				arm()
			}
		case <-debounce.C:
			d := p.m.cfg.Durability.PlacementDebounce
			if !p.m.pex.Met() && time.Since(started) < placementMaxWait*d {
				debounce.Reset(d)
				continue
			}
			since = time.Time{}
			if err := p.recompute(); err != nil && ctx.Err() == nil {
				p.m.log.Warn("placement", "err", err)
			}
		}
	}
}

// recompute places the shards over the storage nodes known now and, if
// that changed what this node holds, moves its durability subscriptions.
func (p *placer) recompute() error {
	nodes := slices.DeleteFunc(p.m.pex.StorageNodes(time.Now()), p.m.live.isDown)
	slices.Sort(nodes)
	p.mu.Lock()
	same := slices.Equal(nodes, p.cur.Nodes())
	p.mu.Unlock()
	if same {
		return nil
	}
	pl, err := placement.New(p.m.cfg.Durability.Replication, ShardCount, nodes)
	if err != nil {
		return err
	}
	held := pl.Shards(p.m.h.ID())
	p.mu.Lock()
	p.cur = pl
	p.mu.Unlock()
	err = p.m.setDurable(held)
	p.m.stats.add(func(s *Stats) {
		s.DurableShards = held
		s.StorageNodes = len(nodes)
		s.PlacementChanges++
	})
	p.m.log.Debug("placement changed", "storage_nodes", len(nodes), "durable_shards", len(held))
	select {
	case p.changed <- struct{}{}:
	default:
	}
	return err
}

func (p *placer) placement() placement.Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Placement returns this node's current view of the placement. Without
// peer exchange it is the zero Placement.
func (m *Mesh) Placement() placement.Placement {
	if m.placer == nil {
		return placement.Placement{}
	}
	return m.placer.placement()
}

// Durable returns the shards this node holds for durability, in
// increasing order.
func (m *Mesh) Durable() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.durable))
}

// HoldsDurable reports whether this node holds shard for durability.
func (m *Mesh) HoldsDurable(shard int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.durable[shard]
}

// PlacementChanges receives a value (without blocking the mesh, so
// several changes may arrive as one) whenever the placement changes. It
// has one reader: the node's anti-entropy, which syncs new shards at once.
func (m *Mesh) PlacementChanges() <-chan struct{} {
	if m.placer == nil {
		return nil
	}
	return m.placer.changed
}
