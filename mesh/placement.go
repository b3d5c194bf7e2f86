package mesh

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/identity"
)

// PlacementDomain separates placement hashes from every other SHA-256 in
// fleetmesh (spec/mesh-placement.md). The version in it is the rule's
// version: a different rule is a different domain.
const PlacementDomain = "fleetmesh/placement/1"

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

// Placement is one node's view of who holds which shard for durability:
// for each shard, the R storage nodes with the highest rendezvous weight
// (spec/mesh-placement.md). Two nodes that know the same storage nodes
// compute the same Placement. The zero Placement places nothing.
type Placement struct {
	r       int
	nodes   []peer.ID
	holders [ShardCount][]peer.ID
}

// placed is a storage node with the key its weights are computed from.
type placed struct {
	id  peer.ID
	key []byte
}

// NewPlacement places every shard on the r of nodes with the highest
// weight. Every node must be named by an Ed25519 PeerID (as every
// fleetmesh node is), since the weight hashes the node's public key;
// repeated nodes count once.
func NewPlacement(r int, nodes []peer.ID) (Placement, error) {
	if r <= 0 {
		return Placement{}, fmt.Errorf("mesh: replication factor %d, want at least 1", r)
	}
	ps := make([]placed, 0, len(nodes))
	seen := make(map[peer.ID]bool, len(nodes))
	for _, id := range nodes {
		if seen[id] {
			continue
		}
		seen[id] = true
		key, err := placementKey(id)
		if err != nil {
			return Placement{}, err
		}
		ps = append(ps, placed{id: id, key: key})
	}
	p := Placement{r: r, nodes: make([]peer.ID, len(ps))}
	for i, n := range ps {
		p.nodes[i] = n.id
	}
	slices.Sort(p.nodes)
	type weighted struct {
		w uint64
		n *placed
	}
	ws := make([]weighted, len(ps))
	for s := range ShardCount {
		for i := range ps {
			ws[i] = weighted{placementWeight(s, ps[i].key), &ps[i]}
		}
		// Highest weight first; equal weights (never seen in practice)
		// are ordered by key so that every node breaks the tie the same way.
		slices.SortFunc(ws, func(a, b weighted) int {
			if c := cmp.Compare(b.w, a.w); c != 0 {
				return c
			}
			return bytes.Compare(a.n.key, b.n.key)
		})
		k := min(r, len(ws))
		p.holders[s] = make([]peer.ID, k)
		for i := range k {
			p.holders[s][i] = ws[i].n.id
		}
	}
	return p, nil
}

// placementKey is the 32-byte Ed25519 public key a PeerID names.
func placementKey(id peer.ID) ([]byte, error) {
	pub, err := identity.PublicKeyFromPeerID(id)
	if err != nil {
		return nil, fmt.Errorf("mesh: placement: %w", err)
	}
	return pub, nil
}

// placementWeight is the rendezvous weight of a node's key for shard: the
// first 8 bytes, big-endian, of SHA-256(PlacementDomain ‖ uint16_be(shard)
// ‖ key).
func placementWeight(shard int, key []byte) uint64 {
	h := sha256.New()
	h.Write([]byte(PlacementDomain))
	h.Write(binary.BigEndian.AppendUint16(nil, uint16(shard)))
	h.Write(key)
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// PlacementWeight is placementWeight for a node named by its PeerID, for
// other implementations' test vectors and for tools.
func PlacementWeight(shard int, id peer.ID) (uint64, error) {
	key, err := placementKey(id)
	if err != nil {
		return 0, err
	}
	return placementWeight(shard, key), nil
}

// Replication is the placement's R.
func (p Placement) Replication() int { return p.r }

// Nodes are the storage nodes placed over, in PeerID order.
func (p Placement) Nodes() []peer.ID { return slices.Clone(p.nodes) }

// Holders returns the nodes that hold shard, highest weight first: min(R,
// number of storage nodes) of them.
func (p Placement) Holders(shard int) []peer.ID {
	if shard < 0 || shard >= ShardCount {
		return nil
	}
	return slices.Clone(p.holders[shard])
}

// Shards returns the shards id holds, in increasing order.
func (p Placement) Shards(id peer.ID) []int {
	var out []int
	for s := range ShardCount {
		if slices.Contains(p.holders[s], id) {
			out = append(out, s)
		}
	}
	return out
}

// placer keeps this node's placement current: it recomputes it when the
// set of known storage nodes changes (debounced), and subscribes to the
// shards this node holds and leaves those it no longer holds.
type placer struct {
	m       *Mesh
	wake    chan struct{}
	changed chan struct{}

	mu  sync.Mutex
	cur Placement
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
			if !p.m.pex.hasMet() && time.Since(started) < placementMaxWait*d {
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
	nodes := slices.DeleteFunc(p.m.pex.storageNodes(time.Now()), p.m.live.isDown)
	slices.Sort(nodes)
	p.mu.Lock()
	same := slices.Equal(nodes, p.cur.nodes)
	p.mu.Unlock()
	if same {
		return nil
	}
	pl, err := NewPlacement(p.m.cfg.Durability.Replication, nodes)
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

func (p *placer) placement() Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// errNoPlacement is returned by calls that need placement when the mesh
// has no peer exchange (and so knows no storage node).
var errNoPlacement = errors.New("mesh: placement is off (no DescriptorVerifier)")

// Placement returns this node's current view of the placement. Without
// peer exchange it is the zero Placement.
func (m *Mesh) Placement() Placement {
	if m.placer == nil {
		return Placement{}
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

// RecomputePlacement recomputes the placement now, without waiting for
// the debounce interval.
func (m *Mesh) RecomputePlacement() error {
	if m.placer == nil {
		return errNoPlacement
	}
	return m.placer.recompute()
}

// setDurable makes shards the set held for durability: it subscribes to
// the new ones and leaves those no longer held that the node's own
// subscriptions do not need. Their events stay in the store.
func (m *Mesh) setDurable(shards []int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := make(map[int]bool, len(shards))
	for _, s := range shards {
		want[s] = true
	}
	for s := range m.durable {
		if !want[s] {
			delete(m.durable, s)
			if !m.neededLocked(s) {
				m.unsubscribeLocked(s)
			}
		}
	}
	var errs []error
	for s := range want {
		m.durable[s] = true
		errs = append(errs, m.subscribeLocked(s))
	}
	return errors.Join(errs...)
}
