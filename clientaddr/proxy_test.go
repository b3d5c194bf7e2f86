package clientaddr

import (
	"net/http"
	"testing"
)

func TestProxies(t *testing.T) {
	p, err := ParseProxies([]string{"127.0.0.1/32", "::1", "10.9.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	xff := func(v ...string) http.Header {
		h := http.Header{}
		for _, s := range v {
			h.Add("X-Forwarded-For", s)
		}
		return h
	}
	for _, tc := range []struct {
		name, remote string
		h            http.Header
		want         string
	}{
		{"direct client, no header", "192.0.2.1:5", nil, "192.0.2.1:5"},
		{"direct client lying", "192.0.2.1:5", xff("198.51.100.7"), "192.0.2.1:5"},
		{"through the proxy", "127.0.0.1:9", xff("198.51.100.7"), "198.51.100.7"},
		{"proxy over v6", "[::1]:9", xff("2001:db8::1"), "2001:db8::1"},
		{"spoofed left entries", "127.0.0.1:9", xff("6.6.6.6, 198.51.100.7"), "198.51.100.7"},
		{"two proxies", "127.0.0.1:9", xff("198.51.100.7, 10.9.1.1"), "198.51.100.7"},
		{"headers repeated", "127.0.0.1:9", xff("6.6.6.6", "198.51.100.7"), "198.51.100.7"},
		{"proxy with no header", "127.0.0.1:9", nil, "127.0.0.1:9"},
		{"garbage hop", "127.0.0.1:9", xff("not-an-ip"), "127.0.0.1:9"},
	} {
		if got := p.Client(tc.remote, tc.h); got != tc.want {
			t.Errorf("%s: Client = %q, want %q", tc.name, got, tc.want)
		}
	}
	if _, err := ParseProxies([]string{"nginx"}); err == nil {
		t.Fatal("a name parsed as a proxy")
	}
	var none Proxies
	if none.Client("127.0.0.1:1", xff("198.51.100.7")) != "127.0.0.1:1" {
		t.Fatal("no proxies configured, yet a header was believed")
	}
}

func FuzzProxiesClient(f *testing.F) {
	p, _ := ParseProxies([]string{"127.0.0.0/8", "::1"})
	f.Add("127.0.0.1:1", "198.51.100.7, 10.0.0.1")
	f.Add("192.0.2.1:1", "")
	f.Fuzz(func(t *testing.T, remote, header string) {
		h := http.Header{"X-Forwarded-For": {header}}
		got := p.Client(remote, h)
		if !p.Trusted(remote) && got != remote {
			t.Fatalf("believed a header from an untrusted %q: %q", remote, got)
		}
	})
}

// FuzzProxyText checks that a proxy read from text writes back as text
// that reads to the same prefix, so a written config.toml keeps it.
func FuzzProxyText(f *testing.F) {
	for _, s := range []string{"127.0.0.1/32", "::1", "10.9.0.0/16", "10.9.1.2/16", "fe80::1%eth0", "nginx", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var p Proxy
		if err := p.UnmarshalText([]byte(s)); err != nil {
			return
		}
		b, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Proxy
		if err := back.UnmarshalText(b); err != nil || back != p {
			t.Fatalf("%q read as %v, written %q, read back %v (%v)", s, p.Prefix, b, back.Prefix, err)
		}
	})
}
