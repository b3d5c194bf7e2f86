package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"fleetmesh.org/fleetmesh/iroh"
)

// Transports and paths, the labels of fleetmesh_transport_streams_total
// (spec/iroh.md, "Choosing a transport").
const (
	transportLibp2p = "libp2p"
	transportIroh   = "iroh"
	pathDirect      = "direct"
	pathRelay       = "relay"
	pathUnknown     = "unknown"
)

// route is what the node knows, when it opens a stream, of the ways to a
// peer.
type route struct {
	// libp2p is the path of the best libp2p connection to the peer:
	// pathDirect, pathRelay (only through a circuit relay) or "" for
	// none.
	libp2p string
	// iroh says whether iroh can be tried at all: the helper serves and
	// an iroh address of the peer is known.
	iroh bool
	// irohPath is the selected path of an open iroh connection to the
	// peer: pathDirect, pathRelay, pathUnknown (none selected yet), or ""
	// for no connection.
	irohPath string
}

// rank orders the ways to a peer, best first (spec/iroh.md, "Choosing a
// transport"): a direct libp2p connection, then a direct iroh one, then
// iroh relayed or not yet connected, then a libp2p circuit, then a libp2p
// dial.
func (r route) rank(transport string) int {
	if transport == transportLibp2p {
		switch r.libp2p {
		case pathDirect:
			return 0
		case pathRelay:
			return 3
		}
		return 4
	}
	if r.irohPath == pathDirect {
		return 1
	}
	return 2
}

// plan is the transports to try, in order; the second is the fallback
// when the first cannot open a stream.
func (r route) plan() []string {
	out := []string{transportLibp2p}
	if r.iroh {
		out = append(out, transportIroh)
	}
	slices.SortStableFunc(out, func(a, b string) int { return r.rank(a) - r.rank(b) })
	return out
}

// duplex is a stream on either transport: a libp2p stream or an iroh
// bi-stream.
type duplex interface {
	io.ReadWriteCloser
	CloseWrite() error
	Reset() error
	SetDeadline(time.Time) error
}

// routeTo gathers what the node knows of the ways to p, and the iroh
// address to dial.
func (ip *irohPart) routeTo(p peer.ID) (route, iroh.Addr) {
	var r route
	for _, c := range ip.mp.m.Host().Network().ConnsToPeer(p) {
		if !c.Stat().Limited {
			r.libp2p = pathDirect
			break
		}
		r.libp2p = pathRelay
	}
	if _, up := ip.ep.Info(); !up {
		return r, iroh.Addr{}
	}
	a, ok := ip.addrOf(p)
	r.iroh = ok
	if ok {
		r.irohPath = ip.irohPath(a.ID)
	}
	return r, a
}

// irohPath is the path of the open iroh connections to id: direct if
// any is, else relay if any is, else unknown; "" for none.
func (ip *irohPart) irohPath(id string) string {
	out := ""
	for _, c := range ip.ep.Conns() {
		if c.Remote != id {
			continue
		}
		switch {
		case c.Path == "direct":
			return pathDirect
		case c.Path == "relay":
			out = pathRelay
		case out == "":
			out = pathUnknown
		}
	}
	return out
}

// errNoRoute is returned by open when every way to the peer failed; it
// wraps the last error.
var errNoRoute = errors.New("node: no transport reached the peer")

// open opens a stream of protocol proto (a libp2p protocol id, and the
// ALPN of the same name) to p over the best way route finds, falling back
// to the next, and counts the transport and path it used.
func (ip *irohPart) open(ctx context.Context, p peer.ID, proto string) (duplex, error) {
	r, a := ip.routeTo(p)
	var last error
	for _, t := range r.plan() {
		if t == transportIroh {
			s, err := ip.ep.Dial(ctx, a, proto)
			if err == nil {
				ip.count(transportIroh, ip.irohPath(a.ID))
				return s, nil
			}
			last = err
			ip.log.Debug("iroh: dial failed; trying the next transport", "peer", p, "protocol", proto, "err", err)
			continue
		}
		s, err := ip.mp.m.Host().NewStream(ctx, p, protocol.ID(proto))
		if err == nil {
			path := pathDirect
			if s.Conn().Stat().Limited {
				path = pathRelay
			}
			ip.count(transportLibp2p, path)
			return s, nil
		}
		last = err
	}
	return nil, fmt.Errorf("%w %s (%s): %w", errNoRoute, p, proto, last)
}

// count records one stream the node opened.
func (ip *irohPart) count(transport, path string) {
	if path == "" {
		path = pathUnknown
	}
	ip.mu.Lock()
	ip.opened[[2]string{transport, path}]++
	ip.mu.Unlock()
}

// irohPeers are the peers to sync and exchange with over iroh: those with
// an iroh route and no libp2p connection, which the mesh's own rounds
// never pick. Every [iroh] peers entry is listed; of the rest (peers with
// an open iroh connection, and peers whose descriptors list an iroh
// address) at most maxIrohRoundPeers, a random sample, so that a node
// that has learnt many descriptors does not sync with all of them each
// round.
func (ip *irohPart) irohPeers() []peer.ID {
	h := ip.mp.m.Host()
	self := h.ID()
	usable := func(p peer.ID) bool {
		return p != self && h.Network().Connectedness(p) != network.Connected
	}
	var out, more []peer.ID
	for p := range ip.peers {
		if usable(p) {
			out = append(out, p)
		}
	}
	add := func(p peer.ID) {
		if usable(p) && !slices.Contains(out, p) && !slices.Contains(more, p) {
			more = append(more, p)
		}
	}
	for _, c := range ip.ep.Conns() {
		if p, err := iroh.PeerID(c.Remote); err == nil {
			add(p)
		}
	}
	if pex := ip.mp.m.PeerExchange(); pex != nil {
		for _, info := range pex.Infos() {
			if info.Iroh != nil {
				add(info.ID)
			}
		}
	}
	rand.Shuffle(len(more), func(i, j int) { more[i], more[j] = more[j], more[i] })
	return append(out, more[:min(len(more), maxIrohRoundPeers)]...)
}

// maxIrohRoundPeers bounds the peers irohPeers adds to the configured
// ones.
const maxIrohRoundPeers = 8
