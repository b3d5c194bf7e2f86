package clientaddr

import (
	"net/netip"
	"testing"
)

// FuzzOf checks that any remote address string gives a key without
// panicking, and that an IPv6 key's /64 lies inside its /56.
func FuzzOf(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "[2001:db8::1]:443", "[::ffff:1.2.3.4]:1", "[fe80::1%eth0]:9", "x", "", ":", "[::]:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := Of(s)
		if k.Wide == "" {
			return
		}
		n, err1 := netip.ParsePrefix(k.Narrow)
		w, err2 := netip.ParsePrefix(k.Wide)
		if err1 != nil || err2 != nil || n.Bits() != 64 || w.Bits() != 56 || !w.Contains(n.Addr()) {
			t.Fatalf("Of(%q) = %+v", s, k)
		}
	})
}
