package mesh

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// TestHostTransports builds two real hosts on loopback and connects them
// over each of TCP, QUIC and WebSocket in turn (Noise and yamux or QUIC's
// own security), checking the PeerID is the node key's. Each transport is
// dialled by a host of its own: a shared dialler's peerstore is rewritten by
// the identify exchange of the connection before, which can expire the one
// address a dial was given and leave it "no addresses".
func TestHostTransports(t *testing.T) {
	cfg := Config{ListenAddrs: []string{
		"/ip4/127.0.0.1/tcp/0",
		"/ip4/127.0.0.1/udp/0/quic-v1",
		"/ip4/127.0.0.1/tcp/0/ws",
	}, ConnLowWater: 4, ConnHighWater: 8, ResourceMaxMemory: 256 << 20, ResourceMaxFDs: 256}
	key := newKey(t)
	a, err := NewHost(key, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.ID() != key.PeerID() {
		t.Fatalf("host PeerID %s, node key's PeerID %s", a.ID(), key.PeerID())
	}
	kinds := map[string]ma.Multiaddr{}
	for _, addr := range a.Addrs() {
		s := addr.String()
		switch {
		case strings.HasSuffix(s, "/ws"):
			kinds["ws"] = addr
		case strings.Contains(s, "/quic-v1"):
			kinds["quic"] = addr
		case strings.Contains(s, "/tcp/"):
			kinds["tcp"] = addr
		}
	}
	for _, kind := range []string{"tcp", "quic", "ws"} {
		t.Run(kind, func(t *testing.T) {
			addr, ok := kinds[kind]
			if !ok {
				t.Fatalf("host listens on no %s address: %v", kind, a.Addrs())
			}
			b, err := NewHost(newKey(t), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: []ma.Multiaddr{addr}}); err != nil {
				t.Fatal(err)
			}
			conns := b.Network().ConnsToPeer(a.ID())
			if len(conns) == 0 {
				t.Fatal("no connection after Connect")
			}
			if got := conns[0].RemoteMultiaddr(); !got.Equal(addr) {
				t.Fatalf("connected over %s, want %s", got, addr)
			}
			if err := b.Network().ClosePeer(a.ID()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(c *Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"bad listen address", func(c *Config) { c.ListenAddrs = []string{"/ip4/nope"} }, false},
		{"bootstrap without peer id", func(c *Config) { c.Bootstrap = []string{"/ip4/127.0.0.1/tcp/4001"} }, false},
		{"bootstrap with peer id", func(c *Config) {
			c.Bootstrap = []string{"/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"}
		}, true},
		{"unknown DHT mode", func(c *Config) { c.DHT = "sometimes" }, false},
		{"low above high", func(c *Config) { c.ConnLowWater, c.ConnHighWater = 10, 5 }, false},
		{"negative bound", func(c *Config) { c.MaxMessageBytes = -1 }, false},
		{"memory without fds", func(c *Config) { c.ResourceMaxMemory = 1 << 30 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{}
			tc.mod(&c)
			if err := c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
