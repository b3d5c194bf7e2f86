package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"

	"fleetmesh.org/fleetmesh/announce"
	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/meshsync"
)

// descriptorTTL is how long the node's signed descriptor is valid; it is
// re-signed well before.
const descriptorTTL = 24 * time.Hour

// selfDescriptor is the node's own signed descriptor (spec/descriptor.md):
// its class and offers follow its NAT status, and it is signed again
// whenever that or its addresses change, then handed to peer exchange and
// to the announcer.
type selfDescriptor struct {
	m   *mesh.Mesh
	key *identity.Key
	cfg config.Config
	log *slog.Logger
	// changed is signalled when the node's reachability, relaying or
	// addresses change: the descriptor is signed again.
	changed chan struct{}
	// irohAddr is the iroh address the descriptor lists (node/iroh.go),
	// irohRelay the iroh relay it offers (node/irohrelay.go); nil when
	// off. Set before run.
	irohAddr  func() *descriptor.IrohAddr
	irohRelay func(class descriptor.Class, relayURL string) *descriptor.IrohRelayOffer
	// announcer publishes the descriptor to [mesh] announce_relays
	// (spec/announce.md); nil when none is configured.
	announcer *announce.Announcer
	// withdrawn is set while the store is nearly at its bound: the
	// descriptor then offers no storage, so placement gives this node no
	// new durable shards (watchStorage).
	withdrawn atomic.Bool

	// Owned by run once it has started.
	lastSeq   uint64
	lastClass descriptor.Class
}

// newSelfDescriptor makes the node's descriptor; m is set before it is
// first signed.
func newSelfDescriptor(opts Options) *selfDescriptor {
	return &selfDescriptor{key: opts.Key, cfg: opts.Config, log: opts.Log, changed: make(chan struct{}, 1)}
}

// resign asks run to sign the descriptor again soon.
func (sd *selfDescriptor) resign() {
	select {
	case sd.changed <- struct{}{}:
	default: // a re-sign is already due
	}
}

// run signs the descriptor again whenever resign asks, and every
// interval so that it never nears expiry, until ctx ends. The first
// signature is publish's, before run starts.
func (sd *selfDescriptor) run(ctx context.Context, every time.Duration, relayURL string) {
	periodic.Run(ctx, every, every, sd.changed, func() { sd.publish(relayURL) })
}

// class is the class the node declares now (declaredClass).
func (sd *selfDescriptor) class(st mesh.NATStatus) descriptor.Class {
	return declaredClass(sd.cfg.Class, st)
}

// declaredClass is the class a node configured with class declares given
// its NAT status: the configured one, or with class auto, anchor while it
// is publicly reachable and relays for others, home otherwise.
func declaredClass(class string, st mesh.NATStatus) descriptor.Class {
	if class != config.ClassAuto && class != "" {
		return descriptor.Class(class)
	}
	if st.Reachability == network.ReachabilityPublic && st.RelayService {
		return descriptor.ClassAnchor
	}
	return descriptor.ClassHome
}

// publish signs the node's descriptor as things stand and hands it to
// peer exchange. Only the mesh part's start, then run, call it, never at
// once.
func (sd *selfDescriptor) publish(relayURL string) {
	st := sd.m.NATStatus()
	class := sd.class(st)
	if sd.lastClass != "" && class != sd.lastClass {
		sd.log.Info("mesh: class changed", "from", sd.lastClass, "to", class, "reachability", st.Reachability.String(), "relay_service", st.RelayService)
	}
	sd.lastClass = class
	now := time.Now()
	// Strictly increasing, so a re-sign within the same millisecond still
	// supersedes the last descriptor.
	sd.lastSeq = max(uint64(now.UnixMilli()), sd.lastSeq+1)
	d := descriptor.Descriptor{
		DID:       sd.key.DID(),
		Class:     class,
		Seq:       sd.lastSeq,
		IssuedAt:  now.Unix(),
		Expires:   now.Add(descriptorTTL).Unix(),
		Addresses: descriptor.Addresses{Libp2p: meshAddrs(sd.m.Host()), Relays: []string{relayURL}},
		Protocols: []string{meshsync.ProtocolID},
		Offers:    descriptor.Offers{Storage: storageOffer(sd.cfg)},
	}
	if sd.withdrawn.Load() {
		d.Offers.Storage = nil
	}
	if c := sd.cfg.Compute; c.Offer {
		d.Offers.Compute = &descriptor.ComputeOffer{MaxConcurrentJobs: uint64(c.Concurrency), MaxFuel: c.MaxFuel, MaxMemoryBytes: uint64(c.MaxMemoryPages) << 16}
	}
	if st.RelayService {
		l := sd.m.RelayLimits()
		d.Offers.CircuitRelay = &descriptor.CircuitRelayOffer{
			MaxReservations:   uint64(l.MaxReservations),
			MaxCircuitSeconds: uint64(max(l.CircuitDuration.Duration/time.Second, 1)),
			MaxCircuitBytes:   uint64(l.CircuitBytes),
		}
	}
	if sd.irohAddr != nil {
		d.Addresses.Iroh = sd.irohAddr()
	}
	if sd.irohRelay != nil {
		d.Offers.IrohRelay = sd.irohRelay(class, relayURL)
	}
	signed, err := descriptor.Sign(sd.key, d, descriptor.DefaultLimits())
	if err != nil {
		sd.log.Warn("mesh: sign descriptor", "err", err)
		return
	}
	if err := sd.m.SetLocalDescriptor(signed.JWS); err != nil {
		sd.log.Warn("mesh: set descriptor", "err", err)
	}
	if sd.announcer != nil {
		sd.announcer.Set(signed)
	}
}

// storageOffer is the storage offer of the node's descriptor, which makes
// it a storage node for placement (spec/mesh-placement.md); nil when the
// operator turned it off or the node is a leaf.
func storageOffer(cfg config.Config) *descriptor.StorageOffer {
	if !cfg.Mesh.OfferStorage || cfg.Class == config.ClassLeaf {
		return nil
	}
	keep := cfg.Mesh.StorageRetention.Duration // Validate has held it to 1s or more
	return &descriptor.StorageOffer{MaxBytes: cfg.Mesh.StorageMaxBytes, RetentionSeconds: uint64(keep / time.Second)}
}

// Storage offer watermarks, in percent of storage_max_bytes: at the high
// one the node withdraws its storage offer, below the low one it offers
// again (spec/mesh-placement.md, "A node at its storage bound"). The gap
// keeps a store that hovers at the mark from flapping in and out of the
// placement.
const (
	storageHighPercent = 90
	storageLowPercent  = 80
)

// storageWithdrawn is whether the offer stays withdrawn, given whether it
// was and the store's use of its bound (0: unbounded).
func storageWithdrawn(was bool, used, bound uint64) bool {
	switch {
	case bound == 0:
		return false
	case used >= bound/100*storageHighPercent:
		return true
	case used < bound/100*storageLowPercent:
		return false
	}
	return was
}

// storageWatchEvery is how often watchStorage reads the store's size.
const storageWatchEvery = 10 * time.Second

// watchStorage withdraws the storage offer while the store is nearly at
// its bound and restores it once there is room, re-signing the descriptor
// at each change, until ctx ends. used and bound read the store.
func (sd *selfDescriptor) watchStorage(ctx context.Context, used, bound func() uint64) {
	periodic.Run(ctx, 0, storageWatchEvery, nil, func() {
		u, b := used(), bound()
		was := sd.withdrawn.Load()
		now := storageWithdrawn(was, u, b)
		if now == was {
			return
		}
		sd.withdrawn.Store(now)
		if now {
			sd.log.Warn("mesh: the store is nearly at its bound; storage offer withdrawn, so no new durable shards come here", "used_bytes", u, "storage_max_bytes", b)
		} else {
			sd.log.Info("mesh: the store has room again; storage offered again", "used_bytes", u, "storage_max_bytes", b)
		}
		sd.resign()
	})
}

// openAnnouncer loads (or makes) the home's announcement key and checks
// [mesh] announce_relays.
func openAnnouncer(opts Options) (*announce.Announcer, error) {
	key, err := announce.LoadOrCreateKey(opts.Home.Path(announce.KeyFile))
	if err != nil {
		return nil, err
	}
	a, err := announce.NewAnnouncer(key, opts.Config.Mesh.AnnounceRelays, opts.Log)
	if err != nil {
		return nil, fmt.Errorf("[mesh] announce_relays: %w", err)
	}
	return a, nil
}

// meshAddrs are h's multiaddrs with its PeerID, as a peer would use them
// to bootstrap.
func meshAddrs(h host.Host) []string {
	var out []string
	for _, a := range h.Addrs() {
		out = append(out, a.String()+"/p2p/"+h.ID().String())
	}
	return out
}
