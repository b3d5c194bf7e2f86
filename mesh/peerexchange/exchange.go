package peerexchange

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
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
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/descriptor"
)

// inboundPerRound and inboundBurst bound the exchanges one peer may
// start: a peer exchanges once per maintenance round at most, so four a
// round is generous (spec/limits.md).
const (
	inboundPerRound = 4
	inboundBurst    = 8
)

// Protocol is the stream protocol of peer exchange (spec/mesh-discovery.md).
const Protocol protocol.ID = "/fleetmesh/pex/2.0.0"

// Info is what the mesh needs from a verified node descriptor:
// whose it is, where that node can be reached, its sequence number, when
// it stops being valid, whether it relays circuits for others and whether
// the node counts as a storage node for placement (spec/mesh-placement.md).
type Info struct {
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
	// Iroh is the node's iroh address (spec/iroh.md), nil if it lists
	// none: how a node with no libp2p address is reached.
	Iroh *descriptor.IrohAddr
	// IrohRelay is the URL of the iroh relay an anchor offers, "" for
	// none.
	IrohRelay string
}

// Stream is one peer exchange stream on whichever transport carries it:
// a libp2p stream, or an iroh bi-stream under the ALPN of Protocol's name
// (spec/iroh.md). The messages are the same on both.
type Stream interface {
	io.ReadWriteCloser
	// CloseWrite finishes the sending half.
	CloseWrite() error
	// Reset abandons the stream in both directions.
	Reset() error
	SetDeadline(time.Time) error
}

// Dialer opens a peer exchange stream to id over whichever transport
// reaches it (the node's transport chooser).
type Dialer func(ctx context.Context, id peer.ID) (Stream, error)

// Verifier checks a signed node descriptor (opaque to peer exchange) and
// returns what it says. It must refuse descriptors that are not signed
// by the key of the node they describe, and expired ones; it may refuse
// replays of older sequence numbers. It must be safe for concurrent use.
type Verifier func(raw []byte) (Info, error)

// Config bounds peer exchange. Every field must be positive: package mesh
// fills them from its own Config, after its defaults.
type Config struct {
	// MaxDescriptors bounds the descriptors sent or accepted in one
	// message, and the sums offered or wanted.
	MaxDescriptors int
	// MaxDescriptorBytes bounds one signed descriptor.
	MaxDescriptorBytes int
	// KnownMax bounds the verified descriptors kept to pass on.
	KnownMax int
	// Timeout bounds one exchange.
	Timeout time.Duration
	// Concurrency bounds the exchanges TryExchange runs at once.
	Concurrency int
	// NewsFanout is how many connected peers an exchange is run with as
	// soon as one brings word of a node this node did not know (news.go).
	NewsFanout int
	// NewsInterval is the least time between two such spreads.
	NewsInterval time.Duration
	// Round is how often the owner runs its one exchange of a
	// maintenance round: a peer may start a few exchanges per Round
	// before it is refused and penalized for flooding.
	Round time.Duration
	// MaxTracked bounds the peers whose inbound exchanges are counted.
	MaxTracked int
}

// Offence is a way a peer broke peer exchange.
type Offence int

// The offences Hooks.Penalize is told of.
const (
	// Violation is a message out of protocol: malformed, out of order,
	// or carrying what was not asked for.
	Violation Offence = iota
	// Flood is an exchange started more often than Config.Round allows.
	Flood
)

// Hooks are how peer exchange reports to its owner (package mesh). All
// must be set; none may block for long.
type Hooks struct {
	// Go runs f in a goroutine the owner waits for when it stops; f must
	// return once its context is done. It may refuse (run nothing) once
	// the owner is stopping.
	Go func(f func(ctx context.Context))
	// Penalize is told of a peer that broke the protocol.
	Penalize func(id peer.ID, o Offence)
	// Learnt is told of each new or newer descriptor kept (its addresses
	// are in the peerstore by then): a new chance to reach the node.
	Learnt func(Info)
	// Dial asks the owner for a dial round now: an exchange brought
	// descriptors of nodes it may not be connected to.
	Dial func()
	// StorageChanged is told when the set of storage nodes may have
	// changed: a descriptor that offers storage came, went or changed.
	StorageChanged func()
	// Logger receives debug logs.
	Logger *slog.Logger
}

// Counts are what peer exchange counted since it started.
type Counts struct {
	// Accepted and Rejected count received descriptors kept and refused
	// by the Verifier; one that only repeats a sequence number already
	// seen (descriptor.ErrReplayed) is neither.
	Accepted, Rejected uint64
	// Sent counts descriptors sent.
	Sent uint64
}

type knownDescriptor struct {
	raw  []byte
	sum  descriptorSum
	info Info
	// learnt is when this node first learnt of the node: offers carry
	// the freshest first (news.go).
	learnt time.Time
}

// Service runs peer exchange on a host: it keeps this node's own signed
// descriptor and a bounded table of verified descriptors of others, and
// swaps them with peers over Protocol. Its methods are safe for concurrent
// use.
type Service struct {
	h      host.Host
	cfg    Config
	verify Verifier
	hooks  Hooks
	sem    chan struct{}
	// inbound bounds the exchanges each peer may start with us.
	inbound *clientaddr.Buckets

	accepted, rejected, sent atomic.Uint64

	mu       sync.Mutex
	self     []byte
	selfSum  descriptorSum
	selfInfo Info
	known    map[peer.ID]*knownDescriptor
	sums     map[descriptorSum]*knownDescriptor

	// met is set once an exchange with a peer has completed, either way.
	met bool
	// dial and extra are set by SetTransport: how exchanges open streams
	// (nil: libp2p), and the peers reached over another transport.
	dial  Dialer
	extra func() []peer.ID

	news news
}

// New makes peer exchange for h. The owner serves Protocol with Handle
// and runs Run.
func New(h host.Host, cfg Config, verify Verifier, hooks Hooks) *Service {
	return &Service{
		h:       h,
		cfg:     cfg,
		verify:  verify,
		hooks:   hooks,
		sem:     make(chan struct{}, cfg.Concurrency),
		inbound: clientaddr.NewBuckets(inboundPerRound/cfg.Round.Seconds(), inboundBurst, cfg.MaxTracked),
		known:   make(map[peer.ID]*knownDescriptor),
		sums:    make(map[descriptorSum]*knownDescriptor),
		news:    newNews(),
	}
}

// SetSelf sets the signed descriptor this node hands out, after checking
// that it verifies and names this node.
func (p *Service) SetSelf(raw []byte) error {
	if len(raw) == 0 || len(raw) > p.cfg.MaxDescriptorBytes {
		return fmt.Errorf("peerexchange: own descriptor is %d bytes, want 1 to %d", len(raw), p.cfg.MaxDescriptorBytes)
	}
	info, err := p.verify(raw)
	if err != nil {
		return fmt.Errorf("peerexchange: own descriptor: %w", err)
	}
	if info.ID != p.h.ID() {
		return fmt.Errorf("peerexchange: own descriptor names %s, this node is %s", info.ID, p.h.ID())
	}
	p.mu.Lock()
	news := p.self == nil || !sameReach(p.selfInfo, info)
	p.self = bytes.Clone(raw)
	p.selfInfo = info
	p.selfSum = sha256.Sum256(raw)
	p.mu.Unlock()
	p.hooks.StorageChanged()
	if news {
		// An exchange run before this descriptor existed could not carry
		// it: the peers met so far would learn of this node only at their
		// next maintenance round (news.go).
		p.announceSelf()
	}
	return nil
}

// sameReach reports whether two descriptors of one node say the same
// about reaching and using it: addresses, relaying, storage and class. A
// descriptor that changes any of them is news to its peers; one that is
// only signed again is not.
func sameReach(a, b Info) bool {
	return a.Relay == b.Relay && a.Storage == b.Storage && a.Class == b.Class &&
		slices.EqualFunc(a.Addrs, b.Addrs, func(x, y ma.Multiaddr) bool { return x.Equal(y) })
}

// SetTransport makes exchanges open their streams with d (nil: libp2p
// alone) and adds the peers extra lists (nil: none) to Speakers: peers a
// node reaches over another transport (iroh), which the maintenance round
// and the spreading of news then exchange with too. It may be called
// while the Service runs.
func (p *Service) SetTransport(d Dialer, extra func() []peer.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dial, p.extra = d, extra
}

// Libp2pStream opens a peer exchange stream to id over libp2p: what a
// Dialer falls back to.
func (p *Service) Libp2pStream(ctx context.Context, id peer.ID) (Stream, error) {
	return p.h.NewStream(ctx, id, Protocol)
}

func (p *Service) open(ctx context.Context, id peer.ID) (Stream, error) {
	p.mu.Lock()
	d := p.dial
	p.mu.Unlock()
	if d != nil {
		return d(ctx, id)
	}
	return p.Libp2pStream(ctx, id)
}

// Handle answers an exchange a peer started over libp2p: the stream
// handler of Protocol.
func (p *Service) Handle(s network.Stream) { p.ServeStream(s, s.Conn().RemotePeer()) }

// ServeStream answers an exchange remote started (spec/mesh-discovery.md):
// read its offer, answer with ours and what we want of theirs, read the
// descriptors we wanted and what it wants of ours, send those. remote is
// the peer the transport authenticated; ServeStream closes s.
func (p *Service) ServeStream(s Stream, remote peer.ID) {
	defer s.Close()
	if err := s.SetDeadline(time.Now().Add(p.cfg.Timeout)); err != nil {
		s.Reset()
		return
	}
	if ok, _ := p.inbound.Allow(string(remote)); !ok {
		p.hooks.Penalize(remote, Flood)
		s.Reset()
		return
	}
	r := bufio.NewReader(s)
	first, err := p.read(r)
	if err != nil || len(first.descriptors) > 0 || len(first.want) > 0 {
		if err == nil || errors.Is(err, ErrMalformed) {
			p.hooks.Penalize(remote, Violation)
		}
		s.Reset()
		return
	}
	offer := p.offer(remote)
	want := p.wanted(first.offer)
	if _, err := s.Write(appendMessage(nil, message{offer: offer, want: want})); err != nil {
		s.Reset()
		return
	}
	third, err := p.read(r)
	if err != nil || len(third.offer) > 0 || !asked(third.descriptors, want) {
		if err == nil || errors.Is(err, ErrMalformed) {
			p.hooks.Penalize(remote, Violation)
		}
		s.Reset()
		return
	}
	p.acceptFrom(remote, third.descriptors)
	p.setMet()
	if _, err := s.Write(appendMessage(nil, message{descriptors: p.serve(third.want, offer)})); err != nil {
		s.Reset()
	}
}

// Exchange swaps descriptors with id, a peer a transport reaches. It
// returns how many new or newer descriptors it learnt.
func (p *Service) Exchange(ctx context.Context, id peer.ID) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	s, err := p.open(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("peerexchange: exchange with %s: %w", id, err)
	}
	defer s.Close()
	fail := func(err error) (int, error) {
		s.Reset()
		return 0, fmt.Errorf("peerexchange: exchange with %s: %w", id, err)
	}
	deadline, _ := ctx.Deadline()
	if err := s.SetDeadline(deadline); err != nil {
		return fail(err)
	}
	offer := p.offer(id)
	if _, err := s.Write(appendMessage(nil, message{offer: offer})); err != nil {
		return fail(err)
	}
	r := bufio.NewReader(s)
	second, err := p.read(r)
	if err != nil {
		return fail(err)
	}
	if len(second.descriptors) > 0 {
		return fail(fmt.Errorf("%w: the answer carries descriptors before any were asked for", ErrMalformed))
	}
	want := p.wanted(second.offer)
	if _, err := s.Write(appendMessage(nil, message{descriptors: p.serve(second.want, offer), want: want})); err != nil {
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
		return fail(fmt.Errorf("%w: the last message carries sums or descriptors that were not asked for", ErrMalformed))
	}
	n := p.acceptFrom(id, fourth.descriptors)
	p.setMet()
	return n, nil
}

func (p *Service) read(r *bufio.Reader) (message, error) {
	return readMessage(r, p.cfg.MaxDescriptors, p.cfg.MaxDescriptorBytes)
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

// Joining reports whether this node holds fewer descriptors of other
// nodes than one exchange carries. While it does, it exchanges with every
// peer it connects to, so that a new node learns the mesh quickly; after
// that only the maintenance round's one exchange runs, so that connection
// churn (DHT lookups dial peers, the connection manager trims them) does
// not cost a full exchange per new connection.
func (p *Service) Joining() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.known) < p.cfg.MaxDescriptors
}

// TryExchange runs an exchange with id in the background unless
// Config.Concurrency exchanges are already running.
func (p *Service) TryExchange(id peer.ID) {
	select {
	case p.sem <- struct{}{}:
	default:
		return
	}
	p.hooks.Go(func(ctx context.Context) {
		defer func() { <-p.sem }()
		n, err := p.Exchange(ctx, id)
		if err != nil {
			p.hooks.Logger.Debug("peer exchange failed", "peer", id, "err", err)
			return
		}
		if n > 0 {
			p.hooks.Dial()
		}
	})
}

// offer picks the sums to offer remote: our own descriptor's first, then
// those of a random sample of the others we know, never remote's own.
func (p *Service) offer(remote peer.ID) []descriptorSum {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	out := make([]descriptorSum, 0, p.cfg.MaxDescriptors)
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
func (p *Service) wanted(offer []descriptorSum) []descriptorSum {
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
func (p *Service) serve(want, offered []descriptorSum) [][]byte {
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
	p.sent.Add(uint64(len(out)))
	return out
}

// Accept verifies each descriptor and keeps those that are new or newer
// than what we hold, adding their addresses to the peerstore and telling
// Hooks.Learnt. It returns how many it kept. Exchanges accept what peers
// send this way; tests give descriptors to it directly.
func (p *Service) Accept(raws [][]byte) int { return p.acceptFrom("", raws) }

// acceptFrom is Accept for descriptors that from sent; a node we did not
// know before is news to spread (news.go).
func (p *Service) acceptFrom(from peer.ID, raws [][]byte) int {
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
		if errors.Is(err, descriptor.ErrReplayed) {
			// A sequence number already seen: an older copy still going
			// round, or the node's own re-signing at the same sequence.
			// Dropped as store drops an older one, not refused as bad.
			continue
		}
		if err != nil {
			p.rejected.Add(1)
			continue
		}
		if info.ID == p.h.ID() || !time.Now().Before(info.Expires) {
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
		p.accepted.Add(1)
		p.h.Peerstore().AddAddrs(info.ID, info.Addrs, time.Until(info.Expires))
		p.hooks.Learnt(info)
	}
	return kept
}

// store keeps k unless we hold the same or a newer sequence number for its
// node, evicting the soonest-expiring descriptor when the table is full.
func (p *Service) store(k *knownDescriptor) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.known[k.info.ID]; ok {
		if old.info.Seq >= k.info.Seq {
			return false
		}
		delete(p.sums, old.sum)
		k.learnt = old.learnt
		if old.info.Storage != k.info.Storage {
			p.hooks.StorageChanged()
		}
	} else if len(p.known) >= p.cfg.KnownMax {
		var victim *knownDescriptor
		for _, o := range p.known {
			if victim == nil || o.info.Expires.Before(victim.info.Expires) {
				victim = o
			}
		}
		delete(p.known, victim.info.ID)
		delete(p.sums, victim.sum)
		p.hooks.StorageChanged()
	} else if k.info.Storage {
		p.hooks.StorageChanged()
	}
	p.known[k.info.ID] = k
	p.sums[k.sum] = k
	return true
}

func (p *Service) setMet() {
	p.mu.Lock()
	p.met = true
	p.mu.Unlock()
}

// Met reports whether an exchange with a peer has completed, either way.
func (p *Service) Met() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.met
}

// StorageNodes returns the nodes that count for placement at now: those
// whose unexpired descriptor offers storage, this node's own included.
func (p *Service) StorageNodes(now time.Time) []peer.ID {
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

// Class returns the class the newest unexpired descriptor of id declares,
// "" if none is known.
func (p *Service) Class(id peer.ID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k, ok := p.known[id]; ok && time.Now().Before(k.info.Expires) {
		return k.info.Class
	}
	return ""
}

// Descriptor returns the newest verified, unexpired descriptor known for
// id, this node's own included.
func (p *Service) Descriptor(id peer.ID) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id == p.h.ID() && p.self != nil {
		return bytes.Clone(p.self), true
	}
	k, ok := p.known[id]
	if !ok || !time.Now().Before(k.info.Expires) {
		return nil, false
	}
	return bytes.Clone(k.raw), true
}

// Relays returns up to n peers whose unexpired descriptor makes them relay
// candidates, in random order, with their direct (not relayed) addresses.
func (p *Service) Relays(n int) []peer.AddrInfo {
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

// Infos returns what the unexpired descriptors held say, this node's own
// left out, in no particular order.
func (p *Service) Infos() []Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	out := make([]Info, 0, len(p.known))
	for _, k := range p.known {
		if now.Before(k.info.Expires) {
			out = append(out, k.info)
		}
	}
	return out
}

// Info returns what the unexpired descriptor held for id says.
func (p *Service) Info(id peer.ID) (Info, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.known[id]
	if !ok || !time.Now().Before(k.info.Expires) {
		return Info{}, false
	}
	return k.info, true
}

// IsStorageNode reports whether the descriptor held for id, expired or
// not, makes it a storage node.
func (p *Service) IsStorageNode(id peer.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.known[id]
	return ok && k.info.Storage
}

// Known is the number of other nodes' descriptors held.
func (p *Service) Known() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.known)
}

// Counts returns what peer exchange has counted so far.
func (p *Service) Counts() Counts {
	return Counts{Accepted: p.accepted.Load(), Rejected: p.rejected.Load(), Sent: p.sent.Load()}
}
