package meshsync

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/nostr"
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

// Stored queues ev for the push to relayed peers; the node calls it for
// every event it stores, whatever brought it.
//
// The push carries new events to peers reached only through a circuit
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
func (sc *Scheduler) Stored(ev *nostr.Event) {
	if nostr.ClassOf(ev.Kind) == nostr.Ephemeral {
		return
	}
	select {
	case sc.push <- ev.ID:
	default:
	}
}

// runPush pushes batches until ctx ends.
func (sc *Scheduler) runPush(ctx context.Context) {
	for {
		var batch [][32]byte
		select {
		case <-ctx.Done():
			return
		case id := <-sc.push:
			batch = append(batch, id)
		}
		window := time.NewTimer(relayPushWindow)
	gather:
		for len(batch) < relayPushBatch {
			select {
			case <-ctx.Done():
				window.Stop()
				return
			case id := <-sc.push:
				batch = append(batch, id)
			case <-window.C:
				break gather
			}
		}
		window.Stop()
		sc.pushBatch(ctx, batch)
	}
}

// pushBatch runs one session per relayed peer for the ids in batch.
func (sc *Scheduler) pushBatch(ctx context.Context, batch [][32]byte) {
	peers := sc.relayedPeers()
	if len(peers) == 0 {
		return
	}
	ctx = network.WithAllowLimitedConn(ctx, "fleetmesh: push new events to a peer behind a relay")
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, relayPushTimeout)
			defer cancel()
			st, err := sc.s.SyncWith(sctx, p, nostr.Filter{IDs: batch})
			if err != nil {
				sc.log.Debug("mesh: push to a relayed peer", "peer", p, "err", err)
				return
			}
			if st.Pushed > 0 {
				sc.relayPushed.Add(uint64(st.Pushed))
			}
		})
	}
	wg.Wait()
}

// relayedPeers are the connected peers reached only through a relay that
// speak the sync protocol.
func (sc *Scheduler) relayedPeers() []peer.ID {
	return sc.peersConnected(network.Limited, math.MaxInt, false)
}
