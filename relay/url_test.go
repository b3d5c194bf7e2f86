package relay

import (
	"net"
	"testing"
)

func TestLocalURL(t *testing.T) {
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1:7447", "ws://127.0.0.1:7447"},
		{"0.0.0.0:7447", "ws://127.0.0.1:7447"},
		{"[::]:7447", "ws://[::1]:7447"},
		{"[::1]:80", "ws://[::1]:80"},
		{"[::ffff:0.0.0.0]:9", "ws://127.0.0.1:9"},
		{"192.0.2.7:1", "ws://192.0.2.7:1"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		if got := LocalURL(addr); got != tc.want {
			t.Errorf("LocalURL(%s) = %s, want %s", tc.listen, got, tc.want)
		}
	}
}
