package meshsync

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh/placement"
	"fleetmesh.org/fleetmesh/nostr"
)

// Mesh is what the Scheduler needs of the node's mesh (*mesh.Mesh): its
// host, for connected peers and dials; the durable placement, for the
// holders of a shard; the address book; and content routing.
type Mesh interface {
	Host() host.Host
	// Placement is the current durable placement, Durable the shards this
	// node holds in it, PlacementChanges signalled when it changes.
	Placement() placement.Placement
	Durable() []int
	PlacementChanges() <-chan struct{}
	// HoldsDurable reports whether this node holds a shard for
	// durability, Interested whether its clients want the shard's live
	// events: either way it keeps the shard's events (handoff.go).
	HoldsDurable(shard int) bool
	Interested(shard int) bool
	// ReportUnreachable says a durable co-holder could not be reached.
	ReportUnreachable(p peer.ID)
	// KnownPeers are bootstrap and address-book peers, up to n.
	KnownPeers(n int) []peer.AddrInfo
	// ContentRouting reports whether FindProviders can work at all.
	ContentRouting() bool
	FindProviders(ctx context.Context, id [32]byte, max int) ([]peer.AddrInfo, error)
}

// SchedulerConfig says when the Scheduler syncs and how far a lookup
// goes: the node's [mesh] keys of the same names. Zero values take the
// defaults where one is given.
type SchedulerConfig struct {
	// Filters are what the node keeps and replicates ([mesh] subscribe).
	Filters []nostr.Filter
	// Every is the time between anti-entropy rounds ([mesh]
	// sync_interval, default a minute).
	Every time.Duration
	// LookupPeers bounds the peers each stage of a lookup asks ([mesh]
	// lookup_peers; 0: no lookups, see Lookups).
	LookupPeers int
	// DurablePeers bounds the co-holders one round of the durable
	// anti-entropy syncs with ([mesh] durable_sync_peers).
	DurablePeers int
	// Providers bounds the providers asked for each id a lookup missed,
	// DHTIDs the ids of one filter looked up by content routing ([mesh]
	// lookup_providers and lookup_dht_ids; either 0: none).
	Providers, DHTIDs int
}

// defaultEvery is SchedulerConfig.Every's default.
const defaultEvery = time.Minute

func (c *SchedulerConfig) fill() {
	if c.Every <= 0 {
		c.Every = defaultEvery
	}
}

// FirstRound is how soon after start the first anti-entropy round runs:
// long enough for the first connections, short enough that a restarted
// node catches up at once.
const FirstRound = 2 * time.Second

// Scheduler decides when the node syncs and with whom (spec/mesh-sync.md,
// spec/mesh-placement.md): the filter rounds with a connected peer, the
// durable anti-entropy with co-holders of the held shards, the push of new
// events to peers behind a relay, and the stages of a lookup. The sessions
// themselves are the Service's.
type Scheduler struct {
	s   *Service
	m   Mesh
	cfg SchedulerConfig
	log *slog.Logger
	// extraPeers are peers reached by another transport (iroh), asked
	// last in a lookup's first stage; nil when there are none.
	extraPeers func() []peer.ID
	// prefer reports whether a peer has standing here (SetPrefer); nil:
	// no preference.
	prefer func(peer.ID) bool
	push   chan [32]byte
	// handOff is the hand-off rounds' place in the store (handoff.go),
	// theirs alone.
	handOff handOffCursor

	lookupHits, lookupMisses, lookupDials, relayPushed, handedOff atomic.Uint64
}

// NewScheduler schedules s's sessions over m. From then on s takes
// hand-offs of the shards m holds for durability.
func NewScheduler(s *Service, m Mesh, cfg SchedulerConfig, log *slog.Logger) *Scheduler {
	cfg.fill()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.handOffs.setHolds(m.HoldsDurable)
	return &Scheduler{s: s, m: m, cfg: cfg, log: log, push: make(chan [32]byte, relayPushQueue)}
}

// Config is the configuration in use, defaults filled in.
func (sc *Scheduler) Config() SchedulerConfig { return sc.cfg }

// SetExtraPeers adds peers that lookups ask after the mesh's (the iroh
// transport's). Call it before Run.
func (sc *Scheduler) SetExtraPeers(f func() []peer.ID) { sc.extraPeers = f }

// SetPrefer has sync and lookup rounds ask peers with standing first
// (spec/standing.md "Use"): prefer reports whether a peer has it. Peers
// without standing are still asked, after. Call it before Run.
func (sc *Scheduler) SetPrefer(prefer func(peer.ID) bool) { sc.prefer = prefer }

// preferFirst moves the peers prefer picks to the front, keeping the
// order within each group.
func preferFirst(ps []peer.ID, prefer func(peer.ID) bool) {
	if prefer == nil {
		return
	}
	in := make(map[peer.ID]bool, len(ps))
	for _, p := range ps {
		in[p] = prefer(p)
	}
	slices.SortStableFunc(ps, func(a, b peer.ID) int {
		switch {
		case in[a] == in[b]:
			return 0
		case in[a]:
			return -1
		}
		return 1
	})
}

// Lookups reports whether lookups are on ([mesh] lookup_peers > 0).
func (sc *Scheduler) Lookups() bool { return sc.cfg.LookupPeers > 0 }

// SchedulerCounters are the Scheduler's totals, for /metrics.
type SchedulerCounters struct {
	// LookupHits and LookupMisses count lookups that found at least one
	// event and none; LookupDials the unconnected peers dialled for them.
	LookupHits, LookupMisses, LookupDials uint64
	// RelayPushed counts the events peers reached only through a relay
	// accepted from this node's pushes.
	RelayPushed uint64
	// HandedOff counts the events deleted after every holder of their
	// shard took them (handoff.go).
	HandedOff uint64
}

// Counters returns the totals so far.
func (sc *Scheduler) Counters() SchedulerCounters {
	return SchedulerCounters{
		LookupHits: sc.lookupHits.Load(), LookupMisses: sc.lookupMisses.Load(),
		LookupDials: sc.lookupDials.Load(), RelayPushed: sc.relayPushed.Load(),
		HandedOff: sc.handedOff.Load(),
	}
}

// Run runs the filter rounds, the durable anti-entropy, the hand-off of
// what the node no longer keeps and the push to relayed peers until ctx
// ends, and returns when all have stopped.
func (sc *Scheduler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { sc.runDurable(ctx) })
	wg.Go(func() { sc.runHandOff(ctx) })
	wg.Go(func() { sc.runPush(ctx) })
	wg.Go(func() {
		sc.RunRounds(ctx, "mesh", func() []peer.ID { return sc.syncPeers(1) })
	})
	wg.Wait()
}

// RunRounds runs anti-entropy for each filter with the peers peers lists,
// FirstRound after start and then every interval, until ctx ends; what
// names the transport in the log.
func (sc *Scheduler) RunRounds(ctx context.Context, what string, peers func() []peer.ID) {
	periodic.Run(ctx, FirstRound, sc.cfg.Every, nil, func() {
		for _, p := range peers() {
			for _, f := range sc.cfg.Filters {
				st, err := sc.s.SyncWith(ctx, p, f)
				if err != nil {
					sc.log.Debug(what+": sync", "peer", p, "err", err)
					continue
				}
				if st.Need+st.Have > 0 {
					sc.log.Info(what+": synced", "peer", p, "fetched", st.Fetched, "pushed", st.Pushed, "rounds", st.Rounds)
				}
			}
		}
	})
}

// syncPeers lists up to n connected peers that speak the sync protocol, in
// random order so load spreads, peers with standing first (SetPrefer). A peer reached only through a relay is left
// out: a stream to it waits for a direct connection that may never come,
// and would hold up a REQ's lookup until its deadline.
func (sc *Scheduler) syncPeers(n int) []peer.ID {
	return sc.peersConnected(network.Connected, n, true)
}

// peersConnected lists up to n peers whose connectedness is c and that
// speak the sync protocol, shuffled if asked.
func (sc *Scheduler) peersConnected(c network.Connectedness, n int, shuffle bool) []peer.ID {
	h := sc.m.Host()
	var out []peer.ID
	for _, p := range h.Network().Peers() {
		if h.Network().Connectedness(p) != c {
			continue
		}
		if ok, err := h.Peerstore().SupportsProtocols(p, protocol.ID(ProtocolID)); err == nil && len(ok) > 0 {
			out = append(out, p)
		}
	}
	if shuffle {
		rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		preferFirst(out, sc.prefer)
	}
	return out[:min(len(out), n)]
}
