package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"
)

// circuitLog records what a node's circuit hooks are told.
type circuitLog struct {
	mu     sync.Mutex
	bytes  map[circuitKey]int
	opened map[circuitKey]int
	closed map[circuitKey]int
	refuse peer.ID
}

type circuitKey struct {
	p        peer.ID
	relaying bool
}

func newCircuitLog() *circuitLog {
	return &circuitLog{bytes: map[circuitKey]int{}, opened: map[circuitKey]int{}, closed: map[circuitKey]int{}}
}

func (l *circuitLog) hooks() CircuitHooks {
	return CircuitHooks{
		Bytes: func(p peer.ID, relaying bool, n int) {
			l.mu.Lock()
			l.bytes[circuitKey{p, relaying}] += n
			l.mu.Unlock()
		},
		Opened: func(p peer.ID, relaying bool) func() {
			l.mu.Lock()
			l.opened[circuitKey{p, relaying}]++
			l.mu.Unlock()
			return func() {
				l.mu.Lock()
				l.closed[circuitKey{p, relaying}]++
				l.mu.Unlock()
			}
		},
		AllowReserve: func(p peer.ID) error {
			if p == l.refuse {
				return errors.New("restricted: this node gives circuit_seconds only under a grant")
			}
			return nil
		},
		AllowConnect: func(src, dest peer.ID) error {
			if src == l.refuse || dest == l.refuse {
				return errors.New("restricted: no grant")
			}
			return nil
		},
	}
}

func (l *circuitLog) get(m map[circuitKey]int, p peer.ID, relaying bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return m[circuitKey{p, relaying}]
}

// TestCircuitsMeteredAndGranted runs a relay and three clients on
// loopback, each with circuit hooks: the relay refuses the reservation
// the grant hook refuses, and for a circuit that carries data the relay
// (relaying) and each end (relayed) count the same bytes against each
// other, within the stream negotiation one side sees, and each sees the
// circuit open and close.
func TestCircuitsMeteredAndGranted(t *testing.T) {
	loop := []string{"/ip4/127.0.0.1/tcp/0"}
	base := Config{ListenAddrs: loop, DHT: DHTOff, ConnLowWater: 4, ConnHighWater: 16,
		ResourceMaxMemory: 256 << 20, ResourceMaxFDs: 256, DisableAutoRelay: true}
	open := func(cfg Config, log *circuitLog) *Mesh {
		cfg.Circuits = log.hooks()
		m, err := Open(newKey(t), cfg, Hooks{Sink: newRecordingSink()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	relayCfg := base
	relayCfg.RelayService = RelayOn
	relayCfg.DisableAutoRelay = false
	rl, tl, dl, sl := newCircuitLog(), newCircuitLog(), newCircuitLog(), newCircuitLog()
	r := open(relayCfg, rl)
	target, dialer, refused := open(base, tl), open(base, dl), open(base, sl)
	rl.refuse = refused.Host().ID()
	rid := r.Host().ID()
	relayInfo := peer.AddrInfo{ID: rid, Addrs: r.Host().Addrs()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := client.Reserve(ctx, target.Host(), relayInfo); err != nil {
		t.Fatalf("reservation: %v", err)
	}
	var rerr client.ReservationError
	if _, err := client.Reserve(ctx, refused.Host(), relayInfo); !errors.As(err, &rerr) || !strings.Contains(rerr.Error(), "PERMISSION_DENIED") {
		t.Fatalf("a reservation the grant hook refuses: %v, want PERMISSION_DENIED", err)
	}

	got := make(chan int64, 1)
	target.Host().SetStreamHandler(sinkProtocol, func(s network.Stream) {
		n, _ := io.Copy(io.Discard, s)
		s.Close()
		got <- n
	})
	circuitAddr, err := ma.NewMultiaddr(fmt.Sprintf("%s/p2p/%s/p2p-circuit", r.Host().Addrs()[0], rid))
	if err != nil {
		t.Fatal(err)
	}
	lctx := network.WithAllowLimitedConn(ctx, "test")
	dialer.Host().Peerstore().ClearAddrs(target.Host().ID())
	if err := dialer.Host().Connect(lctx, peer.AddrInfo{ID: target.Host().ID(), Addrs: []ma.Multiaddr{circuitAddr}}); err != nil {
		t.Fatalf("dial through the relay: %v", err)
	}
	s, err := dialer.Host().NewStream(lctx, target.Host().ID(), sinkProtocol)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 40<<10)
	if _, err := s.Write(payload); err != nil {
		t.Fatal(err)
	}
	s.CloseWrite()
	if n := <-got; n != int64(len(payload)) {
		t.Fatalf("%d of %d bytes crossed the circuit", n, len(payload))
	}
	s.Close()
	for _, c := range dialer.Host().Network().ConnsToPeer(target.Host().ID()) {
		c.Close()
	}
	tid, did := target.Host().ID(), dialer.Host().ID()
	eventually(t, 20*time.Second, "the circuit's end seen by the relay and both ends", func() bool {
		return rl.get(rl.closed, tid, true) >= 2 && rl.get(rl.closed, did, true) >= 1 &&
			tl.get(tl.closed, rid, false) >= 1 && dl.get(dl.closed, rid, false) >= 1
	})
	// Both ends and the relay count the circuit's bytes alike: the
	// payload and its encryption and muxing, and a side's stream
	// negotiation, a few hundred bytes a stream.
	for _, c := range []struct {
		name string
		end  *circuitLog
		p    peer.ID
	}{{"target", tl, tid}, {"dialer", dl, did}} {
		gave, received := rl.get(rl.bytes, c.p, true), c.end.get(c.end.bytes, rid, false)
		if gave < len(payload) || received < len(payload) {
			t.Fatalf("%s: the relay counts %d bytes given, the %s %d received, for %d of payload", c.name, gave, c.name, received, len(payload))
		}
		if d := gave - received; d > 1024 || d < -1024 {
			t.Fatalf("%s: the relay counts %d bytes given, the %s %d received", c.name, gave, c.name, received)
		}
		if c.end.get(c.end.bytes, rid, true) != 0 || rl.get(rl.bytes, c.p, false) != 0 {
			t.Fatalf("%s: bytes counted the wrong way round", c.name)
		}
	}
	if n := rl.get(rl.opened, refused.Host().ID(), true); n != 1 {
		t.Fatalf("the refused reservation's stream: opened %d times at the relay, want 1", n)
	}
}
