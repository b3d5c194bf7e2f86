package clientaddr

import (
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		in           string
		narrow, wide string
	}{
		{"127.0.0.1:80", "127.0.0.1", ""},
		{"[::ffff:10.0.0.1]:80", "10.0.0.1", ""},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64", "2001:db8:1::/56"},
		{"[2001:db8:1:2ff:aaaa::1]:443", "2001:db8:1:2ff::/64", "2001:db8:1:200::/56"},
		{"[fe80::1%eth0]:1", "fe80::/64", "fe80::/56"},
		{"not-an-ip", "not-an-ip", ""},
	} {
		k := Of(tc.in)
		if k.Narrow != tc.narrow || k.Wide != tc.wide {
			t.Errorf("clientaddr.Of(%q) = %+v, want %q %q", tc.in, k, tc.narrow, tc.wide)
		}
	}
}

func TestBucketsBounded(t *testing.T) {
	b := NewBuckets(1, 2, 4)
	for i := 0; i < 2; i++ {
		if ok, _ := b.Allow("a"); !ok {
			t.Fatalf("token %d of the burst refused", i)
		}
	}
	if ok, wait := b.Allow("a"); ok || wait <= 0 || wait > time.Second {
		t.Fatalf("over the burst: allowed %v, wait %v", ok, wait)
	}
	for i := 0; i < 100; i++ {
		b.Allow(string(rune('b' + i)))
	}
	if len(b.m) > 4 {
		t.Fatalf("table holds %d keys, bound 4", len(b.m))
	}
}
