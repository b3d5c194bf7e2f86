package relay

import (
	"net/http"
	"testing"

	"fleetmesh.org/fleetmesh/clientaddr"
)

// TestTrustedProxies: through a trusted proxy, each forwarded client has
// its own per-address cap; without trust, X-Forwarded-For is ignored and
// every connection from the proxy's address shares one.
func TestTrustedProxies(t *testing.T) {
	const perIP = 3
	upgrade := func(tr *testRelay, xff string) int {
		t.Helper()
		h := http.Header{"X-Forwarded-For": {xff}}
		ws, resp, err := tr.dialer.Dial(tr.url, h)
		if err != nil {
			if resp == nil {
				t.Fatal(err)
			}
			return resp.StatusCode
		}
		t.Cleanup(func() { ws.Close() })
		return resp.StatusCode
	}
	trusted, _ := clientaddr.ParseProxies([]string{"127.0.0.1/32", "::1"})
	for _, tc := range []struct {
		name    string
		proxies clientaddr.Proxies
		// want is the status of each upgrade, forwarded for A then B.
		wantA, wantB []int
	}{
		{"trusted proxy", trusted, []int{101, 101, 101, 429}, []int{101, 101, 101, 429}},
		{"untrusted", nil, []int{101, 101, 101, 429}, []int{429}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRelay(t, func(c *Config) {
				c.MaxConnsPerIP = perIP
				c.MaxConns = 100
				c.TrustedProxies = tc.proxies
			})
			for i, want := range tc.wantA {
				if got := upgrade(tr, "198.51.100.1"); got != want {
					t.Fatalf("A #%d: %d, want %d", i, got, want)
				}
			}
			for i, want := range tc.wantB {
				if got := upgrade(tr, "198.51.100.2"); got != want {
					t.Fatalf("B #%d: %d, want %d", i, got, want)
				}
			}
		})
	}
}
