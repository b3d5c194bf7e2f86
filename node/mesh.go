package node

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// MeshDir holds the mesh's state (the address book) in a node home.
const MeshDir = "mesh"

// descriptorTTL is how long the node's signed descriptor is valid; it is
// re-signed well before.
const descriptorTTL = 24 * time.Hour

// meshPart is the node's mesh side: live replication, anti-entropy and
// lookups, and the hooks that connect them to the relay.
type meshPart struct {
	m       *mesh.Mesh
	sync    *meshsync.Service
	filters []nostr.Filter
	every   time.Duration
	lookups int
	// Durability and content routing bounds (node/durability.go,
	// node/lookup.go).
	durablePeers, providers, dhtIDs int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// meshLocal is the node's store and relay as meshsync needs them:
// replicated events enter through the relay, which verifies, stores and
// delivers them to live subscribers.
type meshLocal struct {
	*store.Store
	r *relay.Relay
}

func (l meshLocal) AddEvent(ctx context.Context, ev *nostr.Event) (store.Result, error) {
	return l.r.AddEvent(ctx, ev, relay.FromMesh)
}

// Ingest is mesh.Sink: events from GossipSub go the same way.
func (l meshLocal) Ingest(ctx context.Context, ev *nostr.Event, _ peer.ID) error {
	_, err := l.r.AddEvent(ctx, ev, relay.FromMesh)
	return err
}

func openMesh(opts Options, st *store.Store, rl *relay.Relay, policy *boundary.Policy) (*meshPart, error) {
	mc := opts.Config.Mesh
	filters, err := mc.SubscribeFilters()
	if err != nil {
		return nil, err
	}
	every, _ := time.ParseDuration(mc.SyncInterval)
	if every <= 0 {
		every = time.Minute
	}
	maintain, _ := time.ParseDuration(mc.MaintainInterval)
	local := meshLocal{Store: st, r: rl}
	mcfg := mesh.Config{
		ListenAddrs: append([]string{}, mc.Listen...),
		Bootstrap:   mc.Bootstrap,
		MDNS:        mc.MDNS,
		DHT:         mesh.DHTMode(mc.DHT),
		AddrBookDir: opts.Home.Path(MeshDir),
		// Zero takes the mesh's default. The address book is saved as often
		// as connections are maintained, so a node killed without warning
		// still finds its recent peers on restart.
		MaintainInterval:     maintain,
		AddrBookSaveInterval: maintain,
		Durability:           mesh.DurabilityConfig{Replication: mc.Replication},
	}
	m, err := mesh.Open(opts.Key, mcfg, mesh.Hooks{
		Sink: local,
		Policy: func(ev *nostr.Event) (bool, string) {
			if r := policy.Allow(ev, boundary.Replicate); r != nil {
				return false, r.Name
			}
			return true, ""
		},
		VerifyDescriptor: mesh.VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{})),
		Logger:           opts.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("node: mesh: %w", err)
	}
	if err := m.Subscribe(mesh.ShardsFor(filters)...); err != nil {
		m.Close()
		return nil, fmt.Errorf("node: mesh: %w", err)
	}
	mp := &meshPart{
		m:       m,
		sync:    meshsync.New(m.Host(), local, policy, meshsync.Config{}, opts.Log),
		filters: filters,
		every:   every,
		lookups: mc.LookupPeers,

		durablePeers: mc.DurableSyncPeers,
		providers:    mc.LookupProviders,
		dhtIDs:       mc.LookupDHTIDs,
	}
	mp.wire(rl, opts.Log)
	return mp, nil
}

// wire hooks the mesh part into the relay: what the relay stores is
// published and, in durably held shards, announced; REQs look up what the
// node lacks.
func (mp *meshPart) wire(rl *relay.Relay, log *slog.Logger) {
	rl.OnStored = append(rl.OnStored, func(ev *nostr.Event, from relay.Origin) {
		if from == relay.FromMesh {
			return // GossipSub forwards what it delivered; publishing again would echo it
		}
		if err := mp.m.Publish(context.Background(), ev); err != nil {
			log.Debug("mesh: publish", "id", ev.IDHex(), "err", err)
		}
	})
	mp.provideStored(rl)
	if mp.lookups > 0 {
		rl.Lookup = func(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event)) {
			mp.lookup(ctx, f, limit, fn)
		}
	}
}

// syncPeers lists up to n connected peers that speak the sync protocol, in
// random order so load spreads.
func (mp *meshPart) syncPeers(n int) []peer.ID {
	h := mp.m.Host()
	var out []peer.ID
	for _, p := range h.Network().Peers() {
		if ok, err := h.Peerstore().SupportsProtocols(p, protocol.ID(meshsync.ProtocolID)); err == nil && len(ok) > 0 {
			out = append(out, p)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:min(len(out), n)]
}

// start signs the node's descriptor and runs anti-entropy: soon after
// start, then every interval, with a random connected peer, for each
// subscribed filter.
func (mp *meshPart) start(opts Options, relayURL string) {
	ctx, cancel := context.WithCancel(context.Background())
	mp.cancel = cancel
	mp.wg.Add(1)
	// Peers learn of this node through peer exchange from the start.
	mp.publishDescriptor(opts, relayURL)
	mp.wg.Add(1)
	go func() {
		defer mp.wg.Done()
		mp.runDurable(ctx, opts.Log)
	}()
	go func() {
		defer mp.wg.Done()
		t := time.NewTimer(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, p := range mp.syncPeers(1) {
				for _, f := range mp.filters {
					st, err := mp.sync.SyncWith(ctx, p, f)
					if err != nil {
						opts.Log.Debug("mesh: sync", "peer", p, "err", err)
						continue
					}
					if st.Need+st.Have > 0 {
						opts.Log.Info("mesh: synced", "peer", p, "fetched", st.Fetched, "pushed", st.Pushed, "rounds", st.Rounds)
					}
				}
			}
			mp.publishDescriptor(opts, relayURL)
			t.Reset(mp.every)
		}
	}()
}

func (mp *meshPart) publishDescriptor(opts Options, relayURL string) {
	h := mp.m.Host()
	var addrs []string
	for _, a := range h.Addrs() {
		addrs = append(addrs, a.String()+"/p2p/"+h.ID().String())
	}
	now := time.Now()
	d := descriptor.Descriptor{
		DID:       opts.Key.DID(),
		Class:     descriptor.Class(opts.Config.Class),
		Seq:       uint64(now.UnixMilli()),
		IssuedAt:  now.Unix(),
		Expires:   now.Add(descriptorTTL).Unix(),
		Addresses: descriptor.Addresses{Libp2p: addrs, Relays: []string{relayURL}},
		Protocols: []string{meshsync.ProtocolID},
		Offers:    descriptor.Offers{Storage: storageOffer(opts.Config)},
	}
	signed, err := descriptor.Sign(opts.Key, d, descriptor.DefaultLimits())
	if err != nil {
		opts.Log.Warn("mesh: sign descriptor", "err", err)
		return
	}
	if err := mp.m.SetLocalDescriptor(signed.JWS); err != nil {
		opts.Log.Warn("mesh: set descriptor", "err", err)
	}
}

// addrs are the node's mesh multiaddrs with its PeerID, as a peer would
// use them to bootstrap.
func (mp *meshPart) addrs() []string {
	h := mp.m.Host()
	var out []string
	for _, a := range h.Addrs() {
		out = append(out, a.String()+"/p2p/"+h.ID().String())
	}
	return out
}

func (mp *meshPart) close() error {
	if mp.cancel != nil {
		mp.cancel()
	}
	mp.wg.Wait()
	mp.sync.Close()
	return mp.m.Close()
}
