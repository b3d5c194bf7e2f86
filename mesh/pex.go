package mesh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/clientaddr"
)

// pexInboundPerRound and pexInboundBurst bound the exchanges one peer may
// start: a peer exchanges once per maintenance round at most, so four a
// round is generous (spec/limits.md).
const (
	pexInboundPerRound = 4
	pexInboundBurst    = 8
)

// PEXProtocol is the stream protocol of peer exchange (spec/mesh-discovery.md).
const PEXProtocol protocol.ID = "/fleetmesh/pex/2.0.0"

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
	// Class is the class the node declares (anchor, home or leaf), for
	// operators' counts; the mesh decides nothing on it.
	Class string
}

// DescriptorVerifier checks a signed node descriptor (opaque to the mesh)
// and returns what it says. It must refuse descriptors that are not signed
// by the key of the node they describe, and expired ones; it may refuse
// replays of older sequence numbers. It must be safe for concurrent use.
type DescriptorVerifier func(raw []byte) (DescriptorInfo, error)

type knownDescriptor struct {
	raw  []byte
	sum  descriptorSum
	info DescriptorInfo
	// learnt is when this node first learnt of the node: offers carry
	// the freshest first (pexnews.go).
	learnt time.Time
}

// pex runs peer exchange: it keeps this node's own signed descriptor and a
// bounded table of verified descriptors of others, and swaps them with
// peers over PEXProtocol.
type pex struct {
	m      *Mesh
	verify DescriptorVerifier
	sem    chan struct{}
	// inbound bounds the exchanges each peer may start with us.
	inbound *clientaddr.Buckets

	mu       sync.Mutex
	self     []byte
	selfSum  descriptorSum
	selfInfo DescriptorInfo
	known    map[peer.ID]*knownDescriptor
	sums     map[descriptorSum]*knownDescriptor

	// met is set once an exchange with a peer has completed, either way.
	met bool

	news pexNews
}

func newPEX(m *Mesh, verify DescriptorVerifier) *pex {
	return &pex{
		m:       m,
		verify:  verify,
		sem:     make(chan struct{}, m.cfg.PEXConcurrency),
		inbound: clientaddr.NewBuckets(pexInboundPerRound/m.cfg.MaintainInterval.Seconds(), pexInboundBurst, maxScored),
		known:   make(map[peer.ID]*knownDescriptor),
		sums:    make(map[descriptorSum]*knownDescriptor),
		news:    newPEXNews(),
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
	p.selfSum = sha256.Sum256(raw)
	p.mu.Unlock()
	p.m.placer.poke()
	return nil
}

// handle answers an exchange a peer started (spec/mesh-discovery.md): read
// its offer, answer with ours and what we want of theirs, read the
// descriptors we wanted and what it wants of ours, send those.
func (p *pex) handle(s network.Stream) {
	defer s.Close()
	if err := s.SetDeadline(time.Now().Add(p.m.cfg.PEXTimeout)); err != nil {
		s.Reset()
		return
	}
	remote := s.Conn().RemotePeer()
	if ok, _ := p.inbound.Allow(string(remote)); !ok {
		p.m.misb.penalize(remote, MisbehaviorPEXFlood)
		s.Reset()
		return
	}
	r := bufio.NewReader(s)
	first, err := p.read(r)
	if err != nil || len(first.descriptors) > 0 || len(first.want) > 0 {
		if err == nil || errors.Is(err, ErrPEXMalformed) {
			p.m.misb.penalize(remote, MisbehaviorPEXViolation)
		}
		s.Reset()
		return
	}
	offer := p.offer(remote)
	want := p.wanted(first.offer)
	if _, err := s.Write(appendPEXMessage(nil, pexMessage{offer: offer, want: want})); err != nil {
		s.Reset()
		return
	}
	third, err := p.read(r)
	if err != nil || len(third.offer) > 0 || !asked(third.descriptors, want) {
		if err == nil || errors.Is(err, ErrPEXMalformed) {
			p.m.misb.penalize(remote, MisbehaviorPEXViolation)
		}
		s.Reset()
		return
	}
	p.acceptFrom(remote, third.descriptors)
	p.setMet()
	if _, err := s.Write(appendPEXMessage(nil, pexMessage{descriptors: p.serve(third.want, offer)})); err != nil {
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
	fail := func(err error) (int, error) {
		s.Reset()
		return 0, fmt.Errorf("mesh: peer exchange with %s: %w", id, err)
	}
	deadline, _ := ctx.Deadline()
	if err := s.SetDeadline(deadline); err != nil {
		return fail(err)
	}
	offer := p.offer(id)
	if _, err := s.Write(appendPEXMessage(nil, pexMessage{offer: offer})); err != nil {
		return fail(err)
	}
	r := bufio.NewReader(s)
	second, err := p.read(r)
	if err != nil {
		return fail(err)
	}
	if len(second.descriptors) > 0 {
		return fail(fmt.Errorf("%w: the answer carries descriptors before any were asked for", ErrPEXMalformed))
	}
	want := p.wanted(second.offer)
	if _, err := s.Write(appendPEXMessage(nil, pexMessage{descriptors: p.serve(second.want, offer), want: want})); err != nil {
		return fail(err)
	}
	if err := s.CloseWrite(); err != nil {
		return fail(err)
	}
	fourth, err := p.read(r)
	if err != nil {
		return fail(err)
	}
	if len(fourth.offer) > 0 || len(fourth.want) > 0 || !asked(fourth.descriptors, want) {
		return fail(fmt.Errorf("%w: the last message carries sums or descriptors that were not asked for", ErrPEXMalformed))
	}
	n := p.acceptFrom(id, fourth.descriptors)
	p.setMet()
	return n, nil
}

func (p *pex) read(r *bufio.Reader) (pexMessage, error) {
	return readPEXMessage(r, p.m.cfg.PEXMaxDescriptors, p.m.cfg.PEXMaxDescriptorBytes)
}

// asked reports whether every descriptor in got is one whose sum is in want.
func asked(got [][]byte, want []descriptorSum) bool {
	for _, d := range got {
		if !slices.Contains(want, sha256.Sum256(d)) {
			return false
		}
	}
	return true
}

// joining reports whether this node holds fewer descriptors of other
// nodes than one exchange carries. While it does, it exchanges with every
// peer it connects to, so that a new node learns the mesh quickly; after
// that only the maintenance round's one exchange runs, so that connection
// churn (DHT lookups dial peers, the connection manager trims them) does
// not cost a full exchange per new connection.
func (p *pex) joining() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.known) < p.m.cfg.PEXMaxDescriptors
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

// offer picks the sums to offer remote: our own descriptor's first, then
// those of a random sample of the others we know, never remote's own.
func (p *pex) offer(remote peer.ID) []descriptorSum {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	out := make([]descriptorSum, 0, p.m.cfg.PEXMaxDescriptors)
	if p.self != nil {
		out = append(out, p.selfSum)
	}
	others := make([]*knownDescriptor, 0, len(p.known))
	for id, k := range p.known {
		if id != remote && now.Before(k.info.Expires) {
			others = append(others, k)
		}
	}
	rand.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	freshFirst(others, now)
	for _, k := range others {
		if len(out) == cap(out) {
			break
		}
		out = append(out, k.sum)
	}
	return out
}

// wanted returns the sums in offer of descriptors we do not hold. A sum of
// a descriptor we replaced by a newer one is wanted again; accept then
// drops it on its sequence number. Offers are small, so that costs little.
func (p *pex) wanted(offer []descriptorSum) []descriptorSum {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []descriptorSum
	for _, s := range offer {
		if p.sums[s] == nil && s != p.selfSum && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// serve returns the descriptors a peer wants out of what we offered it:
// a wanted sum we did not offer, or no longer hold, is skipped.
func (p *pex) serve(want, offered []descriptorSum) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out [][]byte
	for _, s := range want {
		if !slices.Contains(offered, s) {
			continue
		}
		switch k := p.sums[s]; {
		case s == p.selfSum && p.self != nil:
			out = append(out, p.self)
		case k != nil:
			out = append(out, k.raw)
		}
	}
	p.m.stats.add(func(st *Stats) { st.DescriptorsSent += uint64(len(out)) })
	return out
}

// accept verifies each descriptor and keeps those that are new or newer
// than what we hold, adding their addresses to the peerstore and the address
// book. It returns how many it kept.
func (p *pex) accept(raws [][]byte) int { return p.acceptFrom("", raws) }

// acceptFrom is accept for descriptors that from sent; a node we did not
// know before is news to spread (pexnews.go).
func (p *pex) acceptFrom(from peer.ID, raws [][]byte) int {
	kept := 0
	for _, raw := range raws {
		sum := sha256.Sum256(raw)
		p.mu.Lock()
		known := p.sums[sum] != nil || sum == p.selfSum
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
		p.mu.Lock()
		_, had := p.known[info.ID]
		p.mu.Unlock()
		if !p.store(&knownDescriptor{raw: bytes.Clone(raw), sum: sum, info: info, learnt: time.Now()}) {
			continue
		}
		kept++
		if !had {
			p.noteNewcomer(from)
		}
		p.m.stats.add(func(s *Stats) { s.DescriptorsAccepted++ })
		// New addresses (a relay address, say) are a new chance to reach
		// a peer that failed before.
		p.m.disc.forgetFailure(info.ID)
		p.m.h.Peerstore().AddAddrs(info.ID, info.Addrs, time.Until(info.Expires))
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
		k.learnt = old.learnt
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
	p.sums[k.sum] = k
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

// class returns the class the newest unexpired descriptor of id declares,
// "" if none is known.
func (p *pex) class(id peer.ID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k, ok := p.known[id]; ok && time.Now().Before(k.info.Expires) {
		return k.info.Class
	}
	return ""
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
