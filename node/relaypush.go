package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// Bounds of the push to relayed peers.
const (
	// relayPushQueue bounds the event ids waiting to be pushed; beyond it
	// new ones are dropped (anti-entropy still carries them).
	relayPushQueue = 1024
	// relayPushBatch bounds the ids of one push session.
	relayPushBatch = 128
	// relayPushWindow is how long a push waits for more ids to batch
	// after the first.
	relayPushWindow = 50 * time.Millisecond
	// relayPushTimeout bounds one push session.
	relayPushTimeout = 10 * time.Second
)

// relayPush carries new events to peers reached only through a circuit
// relay. GossipSub opens no streams over limited (relayed) connections, so
// a home node whose only path to a publisher is a relay heard of new
// events only at its next anti-entropy round, and the filter rounds leave
// relayed peers out. Instead, every event the node stores is pushed, in
// batches, to each connected peer reached only through a relay that speaks
// the sync protocol: one sync session over the relayed connection with a
// filter naming the batch's ids (spec/mesh-sync.md), so the peer gets what
// it lacks and nothing it has, within the relay's limits. A peer that
// stores a pushed event pushes it on to its own relayed peers; the
// session finds nothing to send to one that has it, so that stops.
type relayPush struct {
	mp    *meshPart
	log   *slog.Logger
	queue chan [32]byte
}

func newRelayPush(mp *meshPart, log *slog.Logger) *relayPush {
	return &relayPush{mp: mp, log: log, queue: make(chan [32]byte, relayPushQueue)}
}

// hook is the relay's OnStored hook.
func (rp *relayPush) hook(ev *nostr.Event, _ relay.Origin) {
	if nostr.ClassOf(ev.Kind) == nostr.Ephemeral {
		return
	}
	select {
	case rp.queue <- ev.ID:
	default:
	}
}

// run pushes batches until ctx ends.
func (rp *relayPush) run(ctx context.Context) {
	for {
		var batch [][32]byte
		select {
		case <-ctx.Done():
			return
		case id := <-rp.queue:
			batch = append(batch, id)
		}
		window := time.NewTimer(relayPushWindow)
	gather:
		for len(batch) < relayPushBatch {
			select {
			case <-ctx.Done():
				window.Stop()
				return
			case id := <-rp.queue:
				batch = append(batch, id)
			case <-window.C:
				break gather
			}
		}
		window.Stop()
		rp.push(ctx, batch)
	}
}

// push runs one session per relayed peer for the ids in batch.
func (rp *relayPush) push(ctx context.Context, batch [][32]byte) {
	peers := rp.relayedPeers()
	if len(peers) == 0 {
		return
	}
	ctx = network.WithAllowLimitedConn(ctx, "fleetmesh: push new events to a peer behind a relay")
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, relayPushTimeout)
			defer cancel()
			st, err := rp.mp.sync.SyncWith(sctx, p, nostr.Filter{IDs: batch})
			if err != nil {
				rp.log.Debug("mesh: push to a relayed peer", "peer", p, "err", err)
				return
			}
			if st.Pushed > 0 {
				rp.mp.relayPushed.Add(uint64(st.Pushed))
			}
		})
	}
	wg.Wait()
}

// relayedPeers are the connected peers reached only through a relay that
// speak the sync protocol.
func (rp *relayPush) relayedPeers() []peer.ID {
	h := rp.mp.m.Host()
	var out []peer.ID
	for _, p := range h.Network().Peers() {
		if h.Network().Connectedness(p) != network.Limited {
			continue
		}
		if ok, err := h.Peerstore().SupportsProtocols(p, protocol.ID(meshsync.ProtocolID)); err == nil && len(ok) > 0 {
			out = append(out, p)
		}
	}
	return out
}
