package mesh

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
)

func TestConfigNATValidation(t *testing.T) {
	relayID := newKey(t).PeerID().String()
	for _, tc := range []struct {
		name string
		mod  func(c *Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"relay service on", func(c *Config) { c.RelayService = RelayOn }, ""},
		{"relay service off", func(c *Config) { c.RelayService = RelayOff }, ""},
		{"relay service unknown", func(c *Config) { c.RelayService = "sometimes" }, "relay service mode"},
		{"static relay", func(c *Config) { c.StaticRelays = []string{"/ip4/192.0.2.1/tcp/4001/p2p/" + relayID} }, ""},
		{"static relay without peer id", func(c *Config) { c.StaticRelays = []string{"/ip4/192.0.2.1/tcp/4001"} }, "static relay addresses must end in /p2p/"},
		{"static relay not a multiaddr", func(c *Config) { c.StaticRelays = []string{"relay.example.org:4001"} }, "static relay address"},
		{"negative reservations", func(c *Config) { c.RelayLimits.MaxReservations = -1 }, "RelayLimits.MaxReservations is negative"},
		{"negative per-IP reservations", func(c *Config) { c.RelayLimits.MaxReservationsPerIP = -1 }, "RelayLimits.MaxReservationsPerIP"},
		{"negative circuits", func(c *Config) { c.RelayLimits.MaxCircuits = -1 }, "RelayLimits.MaxCircuits"},
		{"negative reservation TTL", func(c *Config) { c.RelayLimits.ReservationTTL = setting.DurationOf(-time.Second) }, "RelayLimits.ReservationTTL"},
		{"negative circuit duration", func(c *Config) { c.RelayLimits.CircuitDuration = setting.DurationOf(-time.Second) }, "RelayLimits.CircuitDuration"},
		{"negative circuit bytes", func(c *Config) { c.RelayLimits.CircuitBytes = -1 }, "RelayLimits.CircuitBytes"},
		{"negative search interval", func(c *Config) { c.RelaySearchInterval = -time.Second }, "RelaySearchInterval"},
		{"negative relay backoff", func(c *Config) { c.RelayBackoff = -time.Second }, "RelayBackoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{}
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	d := Config{}.withDefaults()
	if d.RelayService != RelayAuto || d.RelayLimits != DefaultRelayLimits() || d.NATPortMap {
		t.Fatalf("defaults: relay service %q, limits %+v, port mapping %v; want auto, go-libp2p's limits, no port mapping",
			d.RelayService, d.RelayLimits, d.NATPortMap)
	}
}

func TestCombineReachability(t *testing.T) {
	const (
		unknown = network.ReachabilityUnknown
		public  = network.ReachabilityPublic
		private = network.ReachabilityPrivate
	)
	for _, tc := range []struct {
		v1, v2, want network.Reachability
	}{
		{unknown, unknown, unknown},
		{public, unknown, public},
		{unknown, public, public},
		{private, unknown, private},
		{unknown, private, private},
		// A dial-back that reached any address proves the node public.
		{private, public, public},
		{public, private, public},
		{private, private, private},
	} {
		if got := combineReachability(tc.v1, tc.v2); got != tc.want {
			t.Errorf("v1 %s, v2 %s: got %s, want %s", reachabilityName(tc.v1), reachabilityName(tc.v2), reachabilityName(got), reachabilityName(tc.want))
		}
	}
}

// TestRelayCandidates checks AutoRelay's peer source: configured static
// relays first, then peers whose verified descriptor declares class anchor
// or offers circuit relay, with their direct addresses only; never a peer
// that offers neither, never more than asked for.
func TestRelayCandidates(t *testing.T) {
	static := newKey(t)
	staticAddr := "/ip4/192.0.2.7/tcp/4001/p2p/" + static.PeerID().String()
	_, nodes := newMockMesh(t, 1, func(int, []*testNode) Config {
		cfg := testConfig()
		cfg.StaticRelays = []string{staticAddr}
		return cfg
	}, func(int) Hooks {
		return Hooks{VerifyDescriptor: peerexchange.VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{}))}
	})
	m := nodes[0].m
	anchor, offering, plain := newKey(t), newKey(t), newKey(t)
	sign := func(k *identity.Key, class descriptor.Class, offer *descriptor.CircuitRelayOffer, addrs ...string) []byte {
		now := time.Now().Unix()
		s, err := descriptor.Sign(k, descriptor.Descriptor{
			DID: k.DID(), Class: class, Seq: 1, IssuedAt: now, Expires: now + 3600,
			Addresses: descriptor.Addresses{Libp2p: addrs},
			Offers:    descriptor.Offers{CircuitRelay: offer},
		}, descriptor.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return s.JWS
	}
	circuit := "/ip4/192.0.2.9/tcp/4001/p2p/" + anchor.PeerID().String() + "/p2p-circuit"
	got := m.pex.Accept([][]byte{
		sign(anchor, descriptor.ClassAnchor, nil, "/ip4/192.0.2.1/tcp/4001"),
		sign(offering, descriptor.ClassHome, &descriptor.CircuitRelayOffer{MaxReservations: 8, MaxCircuitSeconds: 120, MaxCircuitBytes: 1 << 17},
			"/ip4/192.0.2.2/udp/4001/quic-v1", circuit),
		sign(plain, descriptor.ClassHome, nil, "/ip4/192.0.2.3/tcp/4001"),
	})
	if got != 3 {
		t.Fatalf("peer exchange kept %d of 3 descriptors", got)
	}
	var ids []peer.ID
	for c := range m.nat.relayCandidates(context.Background(), 10) {
		ids = append(ids, c.ID)
		for _, a := range c.Addrs {
			if _, err := a.ValueForProtocol(ma.P_CIRCUIT); err == nil {
				t.Errorf("candidate %s offered with a relayed address %s", c.ID, a)
			}
		}
		if len(c.Addrs) == 0 {
			t.Errorf("candidate %s has no address", c.ID)
		}
	}
	if len(ids) != 3 || ids[0] != static.PeerID() {
		t.Fatalf("candidates %v, want the static relay %s first, then the anchor and the offering home", ids, static.PeerID())
	}
	if !slices.Contains(ids, anchor.PeerID()) || !slices.Contains(ids, offering.PeerID()) || slices.Contains(ids, plain.PeerID()) {
		t.Fatalf("candidates %v, want %s and %s and not %s", ids, anchor.PeerID(), offering.PeerID(), plain.PeerID())
	}
	n := 0
	for range m.nat.relayCandidates(context.Background(), 2) {
		n++
	}
	if n != 2 {
		t.Fatalf("asked for 2 candidates, got %d", n)
	}
}

const sinkProtocol protocol.ID = "/fleetmesh/test/sink/1.0.0"

// TestRelayServiceLimits runs a node's relay service on loopback with
// tight limits and checks each is honoured by the real circuit relay v2
// protocol: a second reservation is refused beyond MaxReservations, a
// circuit is cut after CircuitBytes, an idle circuit is closed after
// CircuitDuration, and the relay counts all of it in Stats.
func TestRelayServiceLimits(t *testing.T) {
	const circuitBytes = 8 << 10
	loop := []string{"/ip4/127.0.0.1/tcp/0"}
	relayCfg := Config{
		ListenAddrs: loop, DHT: DHTOff, ConnLowWater: 4, ConnHighWater: 16,
		ResourceMaxMemory: 256 << 20, ResourceMaxFDs: 256,
		RelayService: RelayOn,
		RelayLimits:  RelayLimits{MaxReservations: 1, CircuitBytes: circuitBytes, CircuitDuration: setting.DurationOf(3 * time.Second)},
	}
	r, err := Open(newKey(t), relayCfg, Hooks{Sink: newRecordingSink()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st := r.NATStatus(); !st.RelayService {
		t.Fatal("RelayOn: the relay service is not running")
	}
	// No hole punching: on loopback DCUtR would turn a circuit into a
	// direct connection, and the limits are the relay's to enforce.
	clientCfg := Config{ListenAddrs: loop, DHT: DHTOff, ConnLowWater: 4, ConnHighWater: 16,
		ResourceMaxMemory: 256 << 20, ResourceMaxFDs: 256, DisableAutoRelay: true, DisableHolePunching: true}
	newClient := func() host.Host {
		h, err := NewHost(newKey(t), clientCfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	target, second, dialer := newClient(), newClient(), newClient()
	relayInfo := peer.AddrInfo{ID: r.Host().ID(), Addrs: r.Host().Addrs()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := client.Reserve(ctx, target, relayInfo); err != nil {
		t.Fatalf("first reservation: %v", err)
	}
	_, err = client.Reserve(ctx, second, relayInfo)
	var rerr client.ReservationError
	if !errors.As(err, &rerr) || !strings.Contains(rerr.Error(), "RESERVATION_REFUSED") {
		t.Fatalf("second reservation with MaxReservations 1: %v, want RESERVATION_REFUSED", err)
	}

	// The target counts what arrives; the relay may cut the circuit
	// before the stream is even negotiated, and then nothing arrives.
	// A WaitGroup cannot count the handlers: one may start while the
	// test waits (a late stream), and WaitGroup.Add racing Wait is a
	// data race (-race reported it).
	var got, active atomic.Int64
	target.SetStreamHandler(sinkProtocol, func(s network.Stream) {
		active.Add(1)
		defer active.Add(-1)
		n, _ := io.Copy(io.Discard, s)
		got.Add(n)
	})
	circuitAddr, err := ma.NewMultiaddr(r.Host().Addrs()[0].String() + "/p2p/" + r.Host().ID().String() + "/p2p-circuit")
	if err != nil {
		t.Fatal(err)
	}
	limitedCtx := network.WithAllowLimitedConn(ctx, "test")
	connect := func() {
		t.Helper()
		// The circuit address is kept at a TTL identify leaves alone: a
		// late identify or disconnect notice from the circuit before
		// expires the temporary addresses Connect alone would add.
		dialer.Peerstore().ClearAddrs(target.ID())
		dialer.Peerstore().AddAddr(target.ID(), circuitAddr, peerstore.AddressTTL)
		if err := dialer.Connect(limitedCtx, peer.AddrInfo{ID: target.ID(), Addrs: []ma.Multiaddr{circuitAddr}}); err != nil {
			t.Fatalf("dial through the relay: %v", err)
		}
		conns := dialer.Network().ConnsToPeer(target.ID())
		if len(conns) != 1 || !conns[0].Stat().Limited {
			t.Fatalf("want one limited (relayed) connection, have %d (first %v)", len(conns), conns)
		}
		// Identify must finish while this connection lives, or it would
		// add the target's direct addresses after the next ClearAddrs.
		ids, ok := dialer.(interface{ IDService() identify.IDService })
		if !ok {
			t.Fatalf("host %T has no identify service", dialer)
		}
		<-ids.IDService().IdentifyWait(conns[0])
	}

	// Data: the relay resets the circuit once it has carried CircuitBytes
	// in a direction, so less than that of payload arrives.
	connect()
	s, err := dialer.NewStream(limitedCtx, target.ID(), sinkProtocol)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 8*circuitBytes)
	s.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, werr := s.Write(payload)
	s.Close()
	eventually(t, 30*time.Second, "the relay cuts the circuit", func() bool {
		return dialer.Network().Connectedness(target.ID()) != network.Limited &&
			target.Network().Connectedness(dialer.ID()) != network.Limited
	})
	eventually(t, 30*time.Second, "the target's stream handlers return", func() bool { return active.Load() == 0 })
	if n := got.Load(); n >= circuitBytes {
		t.Fatalf("%d payload bytes crossed a circuit limited to %d bytes (write err %v)", n, circuitBytes, werr)
	}

	// Duration: an idle circuit is closed by the relay, which would keep
	// it open forever without the limit.
	connect()
	eventually(t, 30*time.Second, "the relay closes an idle circuit after CircuitDuration", func() bool {
		return dialer.Network().Connectedness(target.ID()) != network.Limited
	})

	eventually(t, 10*time.Second, "the relay counts reservations and circuits", func() bool {
		st := r.Stats()
		return st.RelayReservationsServed == 1 && st.RelayReservationsRefused == 1 && st.RelayCircuits == 2 && st.RelayBytes > 0
	})
}
