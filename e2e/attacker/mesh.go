package main

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multiaddr"
	"github.com/multiformats/go-varint"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/nostr"
)

// peerAttacker is a libp2p host on loopback with a fresh identity, that
// reconnects to the node whenever it is cut off, counting the connections
// it got.
type peerAttacker struct {
	h        host.Host
	node     peer.AddrInfo
	connects atomic.Int64
}

func newPeerAttacker(ctx context.Context, t target) (*peerAttacker, error) {
	// No resource manager of its own, so that every stream it opens goes
	// to the node and every refusal it counts is the node's (or its
	// transport's), never the attacker's own default per-peer limits.
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/"+t.from+"/tcp/0"), libp2p.ResourceManager(&network.NullResourceManager{}))
	if err != nil {
		return nil, err
	}
	ai, err := peer.AddrInfoFromP2pAddr(multiaddr.StringCast(t.mesh))
	if err != nil {
		h.Close()
		return nil, err
	}
	a := &peerAttacker{h: h, node: *ai}
	// A connection counts once it is up on this side. With the muxer
	// agreed inside the security handshake, that may be just before the
	// node's refusal of a banned peer arrives; the node's per-address
	// limits count it before the handshake either way.
	h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.RemotePeer() == ai.ID {
			a.connects.Add(1)
		}
	}})
	if !a.connect(ctx) {
		h.Close()
		return nil, fmt.Errorf("could not connect to %s", t.mesh)
	}
	return a, nil
}

// connect makes sure the attacker is connected; it reports whether it is.
func (a *peerAttacker) connect(ctx context.Context) bool {
	if a.h.Network().Connectedness(a.node.ID) == network.Connected {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return a.h.Connect(cctx, a.node) == nil
}

// streams opens streams of proto to the node on n workers until ctx ends,
// reconnecting when cut off, and hands each (or the error) to use.
func (a *peerAttacker) streams(ctx context.Context, n int, proto protocol.ID, use func(network.Stream, error)) {
	workers(ctx, n, func(ctx context.Context, _ int) {
		for ctx.Err() == nil {
			if !a.connect(ctx) {
				pause(ctx, 50*time.Millisecond)
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			s, err := a.h.NewStream(sctx, a.node.ID, proto)
			cancel()
			use(s, err)
		}
	})
}

func (a *peerAttacker) counts(extra map[string]int64) map[string]int64 {
	extra["connects"] = a.connects.Load()
	return extra
}

func streams(ctx context.Context, t target) result {
	a, err := newPeerAttacker(ctx, t)
	if err != nil {
		return result{Got: "could not connect: " + err.Error()}
	}
	defer a.h.Close()
	var opened, refused atomic.Int64
	a.streams(ctx, 8, protocol.ID(meshsync.ProtocolID), func(s network.Stream, err error) {
		if err != nil {
			refused.Add(1)
			return
		}
		opened.Add(1) // held open, never written
	})
	return result{
		Got:    fmt.Sprintf("%d sync streams opened (then held or reset by the node), %d refused, %d connections", opened.Load(), refused.Load(), a.connects.Load()),
		Counts: a.counts(map[string]int64{"opened": opened.Load(), "refused": refused.Load()}),
	}
}

func pex(ctx context.Context, t target) result {
	a, err := newPeerAttacker(ctx, t)
	if err != nil {
		return result{Got: "could not connect: " + err.Error()}
	}
	defer a.h.Close()
	// A peer-exchange message with 32 descriptors of junk bytes, no
	// offers, no wants (spec/mesh-discovery.md's wire form).
	msg := varint.ToUvarint(32)
	for i := 0; i < 32; i++ {
		d := bytes.Repeat([]byte{byte(i)}, 300)
		msg = append(msg, varint.ToUvarint(uint64(len(d)))...)
		msg = append(msg, d...)
	}
	msg = append(msg, 0, 0)
	var sent, refused atomic.Int64
	a.streams(ctx, 4, peerexchange.Protocol, func(s network.Stream, err error) {
		if err != nil {
			refused.Add(1)
			pause(ctx, 10*time.Millisecond)
			return
		}
		s.Write(msg)
		sent.Add(1)
		s.Close()
	})
	return result{
		Got:    fmt.Sprintf("%d exchanges of 32 junk descriptors sent, %d streams refused, %d connections", sent.Load(), refused.Load(), a.connects.Load()),
		Counts: a.counts(map[string]int64{"sent": sent.Load(), "refused": refused.Load()}),
	}
}

func gossip(ctx context.Context, t target) result {
	a, err := newPeerAttacker(ctx, t)
	if err != nil {
		return result{Got: "could not connect: " + err.Error()}
	}
	defer a.h.Close()
	ps, err := pubsub.NewGossipSub(ctx, a.h, pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign), pubsub.WithNoAuthor())
	if err != nil {
		return result{Got: "gossipsub: " + err.Error()}
	}
	k, _ := nostr.GenerateSecretKey()
	ev := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: 1, Tags: nostr.Tags{}, Content: "spam"}
	k.Sign(ev)
	topic, err := ps.Join(mesh.Topic(mesh.ShardOf(ev.PubKey)))
	if err != nil {
		return result{Got: "join: " + err.Error()}
	}
	// Wait (bounded) until the node is a peer of the topic.
	for i := 0; i < 100 && len(topic.ListPeers()) == 0 && ctx.Err() == nil; i++ {
		pause(ctx, 20*time.Millisecond)
	}
	var sent int64
	for i := 0; ctx.Err() == nil; i++ {
		if i%1000 == 0 {
			a.connect(ctx)
		}
		ev.Content = fmt.Sprint("spam ", i)
		k.Sign(ev)
		ev.Sig[0] ^= 0xff // a bad signature: the costly check fails
		if topic.Publish(ctx, ev.AppendJSON(nil)) != nil {
			break
		}
		sent++
	}
	return result{
		Got:    fmt.Sprintf("%d invalid events published, %d connections", sent, a.connects.Load()),
		Counts: a.counts(map[string]int64{"sent": sent}),
	}
}
