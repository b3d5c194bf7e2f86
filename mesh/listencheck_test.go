package mesh

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestHostRefusesListenAddrInUse starts a host on a TCP port and then a
// second host on the same port, with a QUIC address besides that would
// have let it start: the second must fail with ErrListenAddrInUse naming
// the TCP address (with SO_REUSEPORT both listened). A port held by a
// plain listener of another kind is refused the same way.
func TestHostRefusesListenAddrInUse(t *testing.T) {
	small := Config{ConnLowWater: 4, ConnHighWater: 8, ResourceMaxMemory: 256 << 20, ResourceMaxFDs: 256, DisableAutoRelay: true}
	first := small
	first.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
	a, err := NewHost(newKey(t), first)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var held string
	for _, l := range a.Network().ListenAddresses() {
		if strings.Contains(l.String(), "/tcp/") {
			held = l.String()
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	plain := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ln.Addr().(*net.TCPAddr).Port)

	for _, tt := range []struct{ name, addr string }{
		{"held by a libp2p host", held},
		{"held by a plain listener", plain},
	} {
		t.Run(tt.name, func(t *testing.T) {
			second := small
			second.ListenAddrs = []string{tt.addr, "/ip4/127.0.0.1/udp/0/quic-v1"}
			b, err := NewHost(newKey(t), second)
			if err == nil {
				b.Close()
				t.Fatalf("a second host on %s started", tt.addr)
			}
			if !errors.Is(err, ErrListenAddrInUse) || !strings.Contains(err.Error(), tt.addr) {
				t.Fatalf("error %q: want ErrListenAddrInUse naming %s", err, tt.addr)
			}
			// Alone on the held address it fails the same way.
			second.ListenAddrs = []string{tt.addr}
			if b, err := NewHost(newKey(t), second); err == nil {
				b.Close()
				t.Fatalf("a host on %s alone started", tt.addr)
			} else if !errors.Is(err, ErrListenAddrInUse) {
				t.Fatalf("error %q: want ErrListenAddrInUse", err)
			}
		})
	}
}

func TestListenShape(t *testing.T) {
	for _, tt := range []struct {
		a       string
		anyPort bool
		want    string
	}{
		{"/ip4/127.0.0.1/tcp/4001", false, "/ip4/127.0.0.1/tcp/4001"},
		{"/ip4/127.0.0.1/tcp/4001", true, "/ip4/127.0.0.1/tcp/0"},
		{"/ip4/0.0.0.0/udp/4001/quic-v1", true, "/ip4/0.0.0.0/udp/0/quic-v1"},
		{"/ip6/::/tcp/4002/ws", true, "/ip6/::/tcp/0/ws"},
	} {
		if got := listenShape(tt.a, tt.anyPort); got != tt.want {
			t.Errorf("listenShape(%q, %v) = %q, want %q", tt.a, tt.anyPort, got, tt.want)
		}
	}
}
