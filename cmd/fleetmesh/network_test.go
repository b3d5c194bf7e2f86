package main

import (
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/mesh"
)

// TestNetworkLine: the start line says where the relay and the mesh
// listen, whether the node announces itself on the LAN, and the settings
// that keep it to this machine.
func TestNetworkLine(t *testing.T) {
	def := config.Default()
	cases := []struct {
		name        string
		relay       string
		meshListen  []string
		mdns        mesh.MDNSMode
		want, never []string
	}{
		{"defaults", def.Relay.Listen, def.Mesh.Listen, mesh.MDNSWhilePrivate,
			[]string{"relay 127.0.0.1:7447 (this machine only)", "(every interface)", "announces itself on the LAN by mDNS while home class", "[mesh] mdns = 'off'"}, nil},
		{"kept to itself", "127.0.0.1:7447", []string{"/ip4/127.0.0.1/tcp/4001"}, mesh.MDNSOff,
			[]string{"mesh /ip4/127.0.0.1/tcp/4001 (this machine only)", "does not announce itself on the LAN (mDNS off)"}, []string{"every interface"}},
		{"public relay, dial out only", "0.0.0.0:7447", nil, mesh.MDNSOn,
			[]string{"relay 0.0.0.0:7447 (every interface)", "mesh listens nowhere", "announces itself on the LAN by mDNS."}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := def
			cfg.Relay.Listen, cfg.Mesh.Listen = tc.relay, tc.meshListen
			l := networkLine(cfg, tc.mdns)
			if strings.Contains(l, "\n") || !strings.HasPrefix(l, "network ") {
				t.Fatalf("not one network line: %q", l)
			}
			for _, w := range tc.want {
				if !strings.Contains(l, w) {
					t.Errorf("%q lacks %q", l, w)
				}
			}
			for _, w := range tc.never {
				if strings.Contains(l, w) {
					t.Errorf("%q says %q", l, w)
				}
			}
		})
	}
}
