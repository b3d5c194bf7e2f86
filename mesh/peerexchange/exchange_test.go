package peerexchange

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
)

// recorder is a Hooks owner that records what peer exchange reports.
type recorder struct {
	wg sync.WaitGroup

	mu       sync.Mutex
	penalty  map[peer.ID][]Offence
	learnt   []peer.ID
	dials    int
	storages int
}

func (r *recorder) hooks(ctx context.Context) Hooks {
	return Hooks{
		Go: func(f func(context.Context)) {
			r.wg.Go(func() { f(ctx) })
		},
		Penalize: func(id peer.ID, o Offence) {
			r.mu.Lock()
			r.penalty[id] = append(r.penalty[id], o)
			r.mu.Unlock()
		},
		Learnt: func(i Info) {
			r.mu.Lock()
			r.learnt = append(r.learnt, i.ID)
			r.mu.Unlock()
		},
		Dial:           func() { r.mu.Lock(); r.dials++; r.mu.Unlock() },
		StorageChanged: func() { r.mu.Lock(); r.storages++; r.mu.Unlock() },
		Logger:         slog.New(slog.DiscardHandler),
	}
}

// node is a mocknet host with peer exchange on it, not yet running Run.
type node struct {
	key *identity.Key
	h   host.Host
	p   *Service
	rec *recorder
}

func testConfig() Config {
	return Config{
		MaxDescriptors:     32,
		MaxDescriptorBytes: 16 << 10,
		KnownMax:           1024,
		Timeout:            5 * time.Second,
		Concurrency:        4,
		NewsFanout:         8,
		NewsInterval:       100 * time.Millisecond,
		Round:              500 * time.Millisecond,
		MaxTracked:         64,
	}
}

// newNodes makes count linked, connected mocknet hosts, each serving peer
// exchange with cfg.
func newNodes(t *testing.T, count int, cfg Config) []*node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mn := mocknet.New()
	nodes := make([]*node, count)
	for i := range nodes {
		key, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		addr, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1))
		if err != nil {
			t.Fatal(err)
		}
		h, err := mn.AddPeer(key.Libp2pKey(), addr)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{penalty: map[peer.ID][]Offence{}}
		p := New(h, cfg, VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{})), rec.hooks(ctx))
		h.SetStreamHandler(Protocol, p.Handle)
		nodes[i] = &node{key: key, h: h, p: p, rec: rec}
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		for _, n := range nodes {
			n.rec.wg.Wait()
		}
		if err := mn.Close(); err != nil {
			t.Error(err)
		}
	})
	return nodes
}

// sign signs n's descriptor, offering storage or not.
func (n *node) sign(t *testing.T, seq uint64, storage bool) []byte {
	t.Helper()
	return n.signAt(t, seq, storage, time.Now().Unix())
}

// signAt is sign issued at now (Unix seconds).
func (n *node) signAt(t *testing.T, seq uint64, storage bool, now int64) []byte {
	t.Helper()
	d := descriptor.Descriptor{
		DID:       n.key.DID(),
		Class:     descriptor.ClassHome,
		Seq:       seq,
		IssuedAt:  now,
		Expires:   now + 3600,
		Addresses: descriptor.Addresses{Libp2p: []string{n.h.Addrs()[0].String() + "/p2p/" + n.h.ID().String()}},
	}
	if storage {
		d.Offers.Storage = &descriptor.StorageOffer{MaxBytes: 1 << 30, RetentionSeconds: 86400}
	}
	s, err := descriptor.Sign(n.key, d, descriptor.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return s.JWS
}

// TestExchange runs exchanges between two nodes directly: the first swaps
// both descriptors, a repeat swaps none, a re-signed one replaces the old,
// and the hooks hear of each descriptor learnt and of storage offers.
func TestExchange(t *testing.T) {
	nodes := newNodes(t, 2, testConfig())
	a, b := nodes[0], nodes[1]
	if err := a.p.SetSelf(a.sign(t, 1, true)); err != nil {
		t.Fatal(err)
	}
	if err := b.p.SetSelf(b.sign(t, 1, false)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n, err := a.p.Exchange(ctx, b.h.ID()); err != nil || n != 1 {
		t.Fatalf("first exchange learnt %d (err %v), want 1", n, err)
	}
	if _, ok := b.p.Descriptor(a.h.ID()); !ok {
		t.Fatal("the answering side did not learn the starter's descriptor")
	}
	if n, err := a.p.Exchange(ctx, b.h.ID()); err != nil || n != 0 {
		t.Fatalf("repeated exchange learnt %d (err %v), want 0", n, err)
	}
	newer := b.sign(t, 2, true)
	if err := b.p.SetSelf(newer); err != nil {
		t.Fatal(err)
	}
	if n, err := a.p.Exchange(ctx, b.h.ID()); err != nil || n != 1 {
		t.Fatalf("exchange after re-signing learnt %d (err %v), want 1", n, err)
	}
	if got, _ := a.p.Descriptor(b.h.ID()); string(got) != string(newer) {
		t.Fatal("the newer descriptor did not replace the older one")
	}
	if !a.p.IsStorageNode(b.h.ID()) || len(a.p.StorageNodes(time.Now())) != 2 {
		t.Fatalf("after b offers storage, a counts %v as storage nodes", a.p.StorageNodes(time.Now()))
	}
	if !a.p.Met() || !b.p.Met() {
		t.Fatal("an exchange completed, yet a side has not met a peer")
	}
	if c := a.p.Counts(); c.Accepted != 2 || c.Rejected != 0 || c.Sent != 1 {
		t.Fatalf("a counted %+v, want 2 accepted, 1 sent", c)
	}
	if err := a.p.SetSelf(b.sign(t, 9, false)); err == nil {
		t.Fatal("a node took another node's descriptor as its own")
	}
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	if len(a.rec.learnt) != 2 || a.rec.learnt[0] != b.h.ID() {
		t.Fatalf("a's Learnt heard of %v, want b twice", a.rec.learnt)
	}
	// Its own storage descriptor, b's first and b's storage offer.
	if a.rec.storages < 2 {
		t.Fatalf("StorageChanged told %d times, want at least 2", a.rec.storages)
	}
	if len(a.rec.penalty)+len(b.rec.penalty) != 0 {
		t.Fatalf("penalties in a clean exchange: %v %v", a.rec.penalty, b.rec.penalty)
	}
}

// TestExchangeViolation checks that a peer that sends descriptors before
// any were asked for is penalized for a violation, and one that starts
// exchanges faster than Config.Round allows, for flooding.
func TestExchangeViolation(t *testing.T) {
	nodes := newNodes(t, 2, testConfig())
	a, b := nodes[0], nodes[1]
	s, err := a.h.NewStream(context.Background(), b.h.ID(), Protocol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(appendMessage(nil, message{descriptors: [][]byte{a.sign(t, 1, false)}})); err != nil {
		t.Fatal(err)
	}
	_, _ = s.Read(make([]byte, 1))
	s.Close()
	offences := func() []Offence {
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		return b.rec.penalty[a.h.ID()]
	}
	if got := offences(); len(got) != 1 || got[0] != Violation {
		t.Fatalf("unasked descriptors cost %v, want one Violation", got)
	}
	for range inboundBurst + 1 {
		_, _ = a.p.Exchange(context.Background(), b.h.ID())
	}
	got := offences()
	if got[len(got)-1] != Flood {
		t.Fatalf("%d exchanges at once cost %v, want a Flood last", inboundBurst+1, got)
	}
}

// TestJoining checks the rule that decides whether a new connection
// starts a peer exchange: only while the node holds fewer verified
// descriptors of others than one exchange carries (Config.MaxDescriptors).
// Descriptors go in through Accept, as they do from the wire; its own
// descriptor and rejected ones do not count.
func TestJoining(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDescriptors = 3
	nodes := newNodes(t, 6, cfg)
	self := nodes[0]
	own := self.sign(t, 1, false)
	if err := self.p.SetSelf(own); err != nil {
		t.Fatal(err)
	}
	forged := nodes[5].sign(t, 1, false)
	forged = append(forged[:len(forged)-4:len(forged)-4], "AAAA"...)
	// Signed twice in one second, a descriptor is the same bytes; in two
	// seconds, two copies of one sequence number. The test once signed
	// "the same two again" anew and, on a loaded machine, crossed a
	// second: the second copies were counted as rejected.
	now := time.Now().Unix()
	one, two := nodes[1].signAt(t, 1, false, now), nodes[2].signAt(t, 1, false, now)
	tests := []struct {
		name    string
		give    [][]byte
		kept    int
		joining bool
	}{
		{"knows nobody", nil, 0, true},
		{"its own descriptor does not count", [][]byte{own}, 0, true},
		{"a forged descriptor does not count", [][]byte{forged}, 0, true},
		{"two others, fewer than a message", [][]byte{one, two}, 2, true},
		{"the same two again", [][]byte{one, two}, 0, true},
		{"the same two re-signed at the same sequence", [][]byte{nodes[1].signAt(t, 1, false, now+1), nodes[2].signAt(t, 1, false, now+1)}, 0, true},
		{"a third fills one message", [][]byte{nodes[3].sign(t, 1, false)}, 1, false},
		{"more stays past joining", [][]byte{nodes[4].sign(t, 1, false)}, 1, false},
	}
	for _, tt := range tests {
		if kept := self.p.Accept(tt.give); kept != tt.kept {
			t.Errorf("%s: Accept kept %d descriptors, want %d", tt.name, kept, tt.kept)
		}
		if got := self.p.Joining(); got != tt.joining {
			t.Errorf("%s: Joining() = %v, want %v", tt.name, got, tt.joining)
		}
	}
	if got := self.p.Counts().Rejected; got != 1 {
		t.Errorf("%d descriptors counted as rejected, want the forged one", got)
	}
	if got := self.p.Known(); got != 4 {
		t.Errorf("Known() = %d, want 4", got)
	}
}

// tcpStream is a Stream on a TCP connection: another transport than
// libp2p, as an iroh bi-stream is.
type tcpStream struct{ *net.TCPConn }

func (s tcpStream) Reset() error { return s.Close() }

// TestExchangeOverAnotherTransport: with SetTransport, an exchange runs on
// whatever stream the Dialer opens and ServeStream answers, between two
// nodes libp2p does not connect, and the extra peers are speakers. Iroh
// addresses and anchors' relays in descriptors reach Info.
func TestExchangeOverAnotherTransport(t *testing.T) {
	nodes := newNodes(t, 2, testConfig())
	a, b := nodes[0], nodes[1]
	for _, n := range nodes {
		n.h.Network().ClosePeer(nodes[0].h.ID())
		n.h.Network().ClosePeer(nodes[1].h.ID())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.p.ServeStream(tcpStream{c.(*net.TCPConn)}, a.h.ID())
		}
	}()
	a.p.SetTransport(func(ctx context.Context, id peer.ID) (Stream, error) {
		if id != b.h.ID() {
			return nil, fmt.Errorf("no route to %s", id)
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			return nil, err
		}
		return tcpStream{c.(*net.TCPConn)}, nil
	}, func() []peer.ID { return []peer.ID{b.h.ID(), a.h.ID()} })
	if got := a.p.Speakers(); len(got) != 1 || got[0] != b.h.ID() {
		t.Fatalf("speakers %v, want b alone (the extra peer, not a itself)", got)
	}

	now := time.Now().Unix()
	d := descriptor.Descriptor{
		DID: b.key.DID(), Class: descriptor.ClassAnchor, Seq: 1, IssuedAt: now, Expires: now + 3600,
		Addresses: descriptor.Addresses{Iroh: &descriptor.IrohAddr{EndpointID: b.key.EndpointID(), Direct: []string{"127.0.0.1:4000"}}},
		Offers:    descriptor.Offers{IrohRelay: &descriptor.IrohRelayOffer{URL: "https://b.example/", MaxClients: 1, BytesPerSecond: 1}},
	}
	s, err := descriptor.Sign(b.key, d, descriptor.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.p.SetSelf(s.JWS); err != nil {
		t.Fatal(err)
	}
	if err := a.p.SetSelf(a.sign(t, 1, false)); err != nil {
		t.Fatal(err)
	}
	if n, err := a.p.Exchange(context.Background(), b.h.ID()); err != nil || n != 1 {
		t.Fatalf("exchange over TCP learnt %d (err %v), want 1", n, err)
	}
	if _, ok := b.p.Descriptor(a.h.ID()); !ok {
		t.Fatal("the serving side did not learn the starter's descriptor")
	}
	info, ok := a.p.Info(b.h.ID())
	if !ok || info.Iroh == nil || info.Iroh.EndpointID != b.key.EndpointID() || info.IrohRelay != "https://b.example/" {
		t.Fatalf("a's Info of b: %+v", info)
	}
	if infos := a.p.Infos(); len(infos) != 1 || infos[0].ID != b.h.ID() {
		t.Fatalf("Infos %+v", infos)
	}
	if len(a.h.Network().ConnsToPeer(b.h.ID())) != 0 {
		t.Fatal("the exchange went over libp2p")
	}
}

// TestOwnDescriptorIsNews checks that a node's own descriptor reaches its
// connected peers as soon as it exists, although the exchanges it ran
// before could not carry it, and that signing it again with nothing new
// spreads nothing: the mesh's first exchanges run as soon as a node
// connects, before the node has signed its descriptor, and a node the
// peers it met never learnt of stayed unknown to them until their next
// maintenance round (the mesh stayed a star around its bootstrap node).
func TestOwnDescriptorIsNews(t *testing.T) {
	// Two nodes: with a third, the news of b that a's first exchange
	// brings would make a exchange with it, which could carry a's
	// descriptor by chance.
	nodes := newNodes(t, 2, testConfig())
	a, b := nodes[0], nodes[1]
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	t.Cleanup(func() { cancel(); runs.Wait() })
	for _, n := range nodes {
		for _, o := range nodes {
			if o != n {
				if err := n.h.Peerstore().AddProtocols(o.h.ID(), Protocol); err != nil {
					t.Fatal(err)
				}
			}
		}
		runs.Go(func() { n.p.Run(ctx) })
	}
	if err := b.p.SetSelf(b.sign(t, 1, false)); err != nil {
		t.Fatal(err)
	}
	// The joining exchange, run before a has a descriptor.
	if _, err := a.p.Exchange(ctx, b.h.ID()); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.p.Descriptor(a.h.ID()); ok {
		t.Fatal("b learnt a descriptor a had not signed")
	}
	if err := a.p.SetSelf(a.sign(t, 1, false)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := b.p.Descriptor(a.h.ID()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never learnt a's descriptor: no maintenance round runs here, so only news could carry it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Signed again with the same addresses, class and offers: no news.
	// A changed offer is. The spreading stops first, so that what
	// SetSelf asked for stays to be read.
	cancel()
	runs.Wait()
	tests := []struct {
		name    string
		storage bool
		news    bool
	}{
		{"re-signed, nothing new", false, false},
		{"now offers storage", true, true},
	}
	for i, tt := range tests {
		if err := a.p.SetSelf(a.sign(t, uint64(2+i), tt.storage)); err != nil {
			t.Fatal(err)
		}
		a.p.news.mu.Lock()
		got := a.p.news.self
		a.p.news.mu.Unlock()
		if got != tt.news {
			t.Errorf("%s: own descriptor news = %v, want %v", tt.name, got, tt.news)
		}
	}
}
