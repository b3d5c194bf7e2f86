package verify

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestOperators(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var as []netip.Addr
		for _, s := range ss {
			as = append(as, netip.MustParseAddr(s))
		}
		return as
	}
	cases := []struct {
		name  string
		addrs []netip.Addr
		id    string
		want  []OperatorKey
	}{
		{"none", nil, "", []OperatorKey{}},
		{"ipv4 /24", addrs("203.0.113.7", "203.0.113.200"), "", []OperatorKey{"ip4:203.0.113.0/24"}},
		{"ipv6 /48 and id", addrs("2001:db8:1:2::5"), "acme", []OperatorKey{"ip6:2001:db8:1::/48", "op:acme"}},
		{"4in6 unmapped", addrs("::ffff:198.51.100.9"), "", []OperatorKey{"ip4:198.51.100.0/24"}},
		{"loopback, link-local, unspecified skipped", addrs("127.0.0.1", "::1", "fe80::1", "0.0.0.0", "169.254.1.1"), "", []OperatorKey{}},
		{"private kept", addrs("10.1.2.3"), "", []OperatorKey{"ip4:10.1.2.0/24"}},
	}
	for _, tc := range cases {
		if got := Operators(tc.addrs, tc.id); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Operators = %q, want %q", tc.name, got, tc.want)
		}
	}
}
