package mesh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// PEXProtocol is the stream protocol of peer exchange (spec/mesh-discovery.md).
const PEXProtocol protocol.ID = "/fleetmesh/pex/1.0.0"

// DescriptorInfo is what the mesh needs from a verified node descriptor:
// whose it is, where that node can be reached, its sequence number, when
// it stops being valid, whether it relays circuits for others and whether
// the node counts as a storage node for placement (spec/mesh-placement.md).
type DescriptorInfo struct {
	ID      peer.ID
	Addrs   []ma.Multiaddr
	Seq     uint64
	Expires time.Time
	// Relay is set when the node declares class anchor or offers circuit
	// relay: a candidate for AutoRelay while this node is behind NAT.
	Relay bool
	// Storage is set when the node offers storage and is not a leaf.
	Storage bool
}

// DescriptorVerifier checks a signed node descriptor (opaque to the mesh)
// and returns what it says. It must refuse descriptors that are not signed
// by the key of the node they describe, and expired ones; it may refuse
// replays of older sequence numbers. It must be safe for concurrent use.
type DescriptorVerifier func(raw []byte) (DescriptorInfo, error)

type knownDescriptor struct {
	raw  []byte
	sum  [32]byte
	info DescriptorInfo
}

// pex runs peer exchange: it keeps this node's own signed descriptor and a
// bounded table of verified descriptors of others, and swaps them with
// peers over PEXProtocol.
type pex struct {
	m      *Mesh
	verify DescriptorVerifier
	sem    chan struct{}

	mu       sync.Mutex
	self     []byte
	selfInfo DescriptorInfo
	known    map[peer.ID]*knownDescriptor
	sums     map[[32]byte]bool

	// met is set once an exchange with a peer has completed, either way.
	met bool
}

func newPEX(m *Mesh, verify DescriptorVerifier) *pex {
	return &pex{
		m:      m,
		verify: verify,
		sem:    make(chan struct{}, m.cfg.PEXConcurrency),
		known:  make(map[peer.ID]*knownDescriptor),
		sums:   make(map[[32]byte]bool),
	}
}

// setSelf sets this node's own descriptor after checking it verifies and
// names this node.
func (p *pex) setSelf(raw []byte) error {
	if len(raw) == 0 || len(raw) > p.m.cfg.PEXMaxDescriptorBytes {
		return fmt.Errorf("mesh: own descriptor is %d bytes, want 1 to %d", len(raw), p.m.cfg.PEXMaxDescriptorBytes)
	}
	info, err := p.verify(raw)
	if err != nil {
		return fmt.Errorf("mesh: own descriptor: %w", err)
	}
	if info.ID != p.m.h.ID() {
		return fmt.Errorf("mesh: own descriptor names %s, this node is %s", info.ID, p.m.h.ID())
	}
	p.mu.Lock()
	p.self = bytes.Clone(raw)
	p.selfInfo = info
	p.mu.Unlock()
	p.m.placer.poke()
	return nil
}

// handle answers an exchange a peer started: read its message, answer with
// ours.
func (p *pex) handle(s network.Stream) {
	defer s.Close()
	if err := s.SetDeadline(time.Now().Add(p.m.cfg.PEXTimeout)); err != nil {
		s.Reset()
		return
	}
	remote := s.Conn().RemotePeer()
	got, err := readPEXMessage(bufio.NewReader(s), p.m.cfg.PEXMaxDescriptors, p.m.cfg.PEXMaxDescriptorBytes)
	if err != nil {
		s.Reset()
		return
	}
	p.accept(got)
	p.setMet()
	if _, err := s.Write(appendPEXMessage(nil, p.offer(remote))); err != nil {
		s.Reset()
	}
}

// exchange swaps descriptors with id. It returns how many new or newer
// descriptors it learnt.
func (p *pex) exchange(ctx context.Context, id peer.ID) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.m.cfg.PEXTimeout)
	defer cancel()
	s, err := p.m.h.NewStream(ctx, id, PEXProtocol)
	if err != nil {
		return 0, fmt.Errorf("mesh: peer exchange with %s: %w", id, err)
	}
	defer s.Close()
	deadline, _ := ctx.Deadline()
	if err := s.SetDeadline(deadline); err != nil {
		s.Reset()
		return 0, fmt.Errorf("mesh: peer exchange with %s: %w", id, err)
	}
	if _, err := s.Write(appendPEXMessage(nil, p.offer(id))); err != nil {
		s.Reset()
		return 0, fmt.Errorf("mesh: peer exchange with %s: %w", id, err)
	}
	if err := s.CloseWrite(); err != nil {
		s.Reset()
		return 0, fmt.Errorf("mesh: peer exchange with %s: %w", id, err)
	}
	got, err := readPEXMessage(bufio.NewReader(s), p.m.cfg.PEXMaxDescriptors, p.m.cfg.PEXMaxDescriptorBytes)
	if err != nil {
		s.Reset()
		return 0, fmt.Errorf("mesh: peer exchange with %s: %w", id, err)
	}
	n := p.accept(got)
	p.setMet()
	return n, nil
}

// tryExchange runs an exchange with id in the background unless
// PEXConcurrency exchanges are already running.
func (p *pex) tryExchange(id peer.ID) {
	select {
	case p.sem <- struct{}{}:
	default:
		return
	}
	p.m.goroutine(func(ctx context.Context) {
		defer func() { <-p.sem }()
		n, err := p.exchange(ctx, id)
		if err != nil {
			p.m.log.Debug("peer exchange failed", "peer", id, "err", err)
			return
		}
		if n > 0 {
			p.m.wakeMaintainer()
		}
	})
}

// offer picks what to send to remote: our own descriptor first, then a
// random sample of the others we know, never remote's own.
func (p *pex) offer(remote peer.ID) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	out := make([][]byte, 0, p.m.cfg.PEXMaxDescriptors)
	if p.self != nil {
		out = append(out, p.self)
	}
	others := make([]*knownDescriptor, 0, len(p.known))
	for id, k := range p.known {
		if id != remote && now.Before(k.info.Expires) {
			others = append(others, k)
		}
	}
	rand.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	for _, k := range others {
		if len(out) == cap(out) {
			break
		}
		out = append(out, k.raw)
	}
	return out
}

// accept verifies each descriptor and keeps those that are new or newer
// than what we hold, adding their addresses to the peerstore and the address
// book. It returns how many it kept.
func (p *pex) accept(raws [][]byte) int {
	kept := 0
	for _, raw := range raws {
		sum := sha256.Sum256(raw)
		p.mu.Lock()
		known := p.sums[sum] || bytes.Equal(raw, p.self)
		p.mu.Unlock()
		if known {
			continue
		}
		info, err := p.verify(raw)
		if err != nil {
			p.m.stats.add(func(s *Stats) { s.DescriptorsRejected++ })
			continue
		}
		if info.ID == p.m.h.ID() || !time.Now().Before(info.Expires) {
			continue
		}
		if !p.store(&knownDescriptor{raw: bytes.Clone(raw), sum: sum, info: info}) {
			continue
		}
		kept++
		p.m.stats.add(func(s *Stats) { s.DescriptorsAccepted++ })
		// New addresses (a relay address, say) are a new chance to reach
		// a peer that failed before.
		p.m.disc.forgetFailure(info.ID)
		p.m.h.Peerstore().AddAddrs(info.ID, info.Addrs, info.Expires.Sub(time.Now()))
		if p.m.book != nil {
			// Not seen by us yet: a zero last-seen time ranks the peer
			// below every peer we have actually reached.
			p.m.book.Observe(info.ID, info.Addrs, time.Time{})
		}
	}
	return kept
}

// store keeps k unless we hold the same or a newer sequence number for its
// node, evicting the soonest-expiring descriptor when the table is full.
func (p *pex) store(k *knownDescriptor) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.known[k.info.ID]; ok {
		if old.info.Seq >= k.info.Seq {
			return false
		}
		delete(p.sums, old.sum)
		if old.info.Storage != k.info.Storage {
			p.m.placer.poke()
		}
	} else if len(p.known) >= p.m.cfg.PEXKnownMax {
		var victim *knownDescriptor
		for _, o := range p.known {
			if victim == nil || o.info.Expires.Before(victim.info.Expires) {
				victim = o
			}
		}
		delete(p.known, victim.info.ID)
		delete(p.sums, victim.sum)
		p.m.placer.poke()
	} else if k.info.Storage {
		p.m.placer.poke()
	}
	p.known[k.info.ID] = k
	p.sums[k.sum] = true
	return true
}

func (p *pex) setMet() {
	p.mu.Lock()
	p.met = true
	p.mu.Unlock()
}

// hasMet reports whether an exchange with a peer has completed.
func (p *pex) hasMet() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.met
}

// storageNodes returns the nodes that count for placement at now: those
// whose unexpired descriptor offers storage, this node's own included.
func (p *pex) storageNodes(now time.Time) []peer.ID {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []peer.ID
	if p.self != nil && p.selfInfo.Storage && now.Before(p.selfInfo.Expires) {
		out = append(out, p.selfInfo.ID)
	}
	for id, k := range p.known {
		if k.info.Storage && now.Before(k.info.Expires) {
			out = append(out, id)
		}
	}
	return out
}

// descriptor returns the newest verified descriptor known for id.
func (p *pex) descriptor(id peer.ID) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id == p.m.h.ID() && p.self != nil {
		return bytes.Clone(p.self), true
	}
	k, ok := p.known[id]
	if !ok || !time.Now().Before(k.info.Expires) {
		return nil, false
	}
	return bytes.Clone(k.raw), true
}

// relays returns up to n peers whose unexpired descriptor makes them relay
// candidates, in random order, with their direct (not relayed) addresses.
func (p *pex) relays(n int) []peer.AddrInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var out []peer.AddrInfo
	for id, k := range p.known {
		if !k.info.Relay || !now.Before(k.info.Expires) {
			continue
		}
		var direct []ma.Multiaddr
		for _, a := range k.info.Addrs {
			if _, err := a.ValueForProtocol(ma.P_CIRCUIT); err != nil {
				direct = append(direct, a)
			}
		}
		if len(direct) > 0 {
			out = append(out, peer.AddrInfo{ID: id, Addrs: direct})
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:min(n, len(out))]
}

// errNoPEX is returned by calls that need peer exchange when the mesh has
// no DescriptorVerifier.
var errNoPEX = errors.New("mesh: peer exchange is off (no DescriptorVerifier)")
