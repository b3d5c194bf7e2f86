package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTripAndOverrides(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	def := Default()
	data, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Relay.Listen != DefaultListen || got.Relay.MaxLimit != def.Relay.MaxLimit {
		t.Fatalf("round trip changed the defaults: %+v", got.Relay)
	}
	os.WriteFile(path, []byte("class = \"anchor\"\n[relay]\nevents_per_second = 0\nauth_required_kinds = [4]\n"), 0o644)
	got, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Class != ClassAnchor || got.Relay.EventsPerSecond != 0 || got.Relay.MaxLimit != def.Relay.MaxLimit || len(got.Relay.AuthRequiredKinds) != 1 {
		t.Fatalf("partial file: %+v", got)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"[relay]\nmax_limt = 5\n", "max_limt"},
		{"class = \"server\"\n", "anchor, home, leaf or auto"},
		{"[relay]\nevents_per_second = -1\n", ">= 0"},
		{"[relay]\nquery_timeout = \"ten\"\n", "query_timeout"},
		{"[runtime]\ngc_percent = -1\n", "gc_percent"},
		{"[accounting]\nrequire_grant = ['beer']\n", `accounting.require_grant: unknown service "beer" (events, bytes,`},
		{"[relay]\ntrusted_proxies = ['nginx']\n", `relay.trusted_proxies: "nginx" is not an address`},
		{"[relay\n", FileName},
		{"[store]\nbackend = 'mysql'\n", `store.backend "mysql": must be 'pebble' or 'postgres'`},
		{"[store]\nbackend = 'postgres'\n", "store.postgres_url: backend 'postgres' needs a connection string"},
		{"[store]\nbackend = 'postgres'\npostgres_url = 'mysql://u:hunter2@h/db'\n", "store.postgres_url: \"mysql://u:xxxxx@h/db\" is not a postgres:// URL"},
		{"[store]\nbackend = 'postgres'\npostgres_url = 'postgres://u@127.0.0.1:5432'\n", "names no database"},
		{"[[boundary.rules]]\nname = \"x\"\nclass = \"secret\"\nkinds = [1]\n", "class \"secret\""},
	} {
		path := filepath.Join(t.TempDir(), FileName)
		os.WriteFile(path, []byte(tc.file), 0o644)
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to mention %q", tc.file, err, tc.want)
		}
	}
}

func TestBoundaryRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte("[[boundary.rules]]\nname = \"acme-invoices\"\nclass = \"billing\"\nkinds = [31999]\ntags = [[\"t\", \"invoice\"]]\n"), 0o644)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Boundary.Rules) != 1 || cfg.Boundary.Rules[0].Kinds[0] != 31999 || cfg.Boundary.Rules[0].Tags[0][1] != "invoice" {
		t.Fatalf("got %+v", cfg.Boundary)
	}
}

func TestNATKeys(t *testing.T) {
	const relay = "/ip4/192.0.2.1/tcp/4001/p2p/12D3KooWGzh9oRGr4PKbYFbXTBnPVHNVKvpu5uhcEyfQ3chVozv2"
	for _, tc := range []struct {
		name, file string
		want       string // "" for valid
	}{
		{"defaults", "", ""},
		{"class auto", "class = \"auto\"\n", ""},
		{"class empty is auto", "class = \"\"\n", ""},
		{"relay service on", "[mesh]\nrelay_service = \"on\"\n", ""},
		{"relay service unknown", "[mesh]\nrelay_service = \"maybe\"\n", "mesh.relay_service"},
		{"static relay", "[mesh]\nstatic_relays = [\"" + relay + "\"]\n", ""},
		{"static relay without peer id", "[mesh]\nstatic_relays = [\"/ip4/192.0.2.1/tcp/4001\"]\n", "mesh.static_relays[0]"},
		{"static relay not a multiaddr", "[mesh]\nstatic_relays = [\"relay.example.org:4001\"]\n", "mesh.static_relays[0]"},
		{"search interval", "[mesh]\nrelay_search_interval = \"soon\"\n", "mesh.relay_search_interval"},
		{"reservation ttl", "[mesh.relay_limits]\nreservation_ttl = \"0s\"\n", "mesh.relay_limits.reservation_ttl"},
		{"circuit duration", "[mesh.relay_limits]\ncircuit_duration = \"-1m\"\n", "mesh.relay_limits.circuit_duration"},
		{"no reservations", "[mesh.relay_limits]\nmax_reservations = 0\n", "mesh.relay_limits.max_reservations"},
		{"no reservations per ip", "[mesh.relay_limits]\nmax_reservations_per_ip = 0\n", "mesh.relay_limits.max_reservations_per_ip"},
		{"no circuits", "[mesh.relay_limits]\nmax_circuits = -1\n", "mesh.relay_limits.max_circuits"},
		{"no circuit bytes", "[mesh.relay_limits]\ncircuit_bytes = 0\n", "mesh.relay_limits.circuit_bytes"},
		{"unknown limit", "[mesh.relay_limits]\nmax_bandwidth = 5\n", "max_bandwidth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			os.WriteFile(path, []byte(tc.file), 0o644)
			cfg, err := Load(path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Load: %v, want an error naming %q", err, tc.want)
			case tc.want == "" && cfg.Class != ClassAuto && !strings.Contains(tc.file, "class"):
				t.Fatalf("class %q, want the default auto", cfg.Class)
			}
		})
	}
	d := Default()
	if d.Class != ClassAuto || d.Mesh.NATPortMap || !d.Mesh.AutoRelay || !d.Mesh.HolePunching || d.Mesh.RelayService != "auto" {
		t.Fatalf("defaults: class %q, nat_port_map %v, auto_relay %v, hole_punching %v, relay_service %q",
			d.Class, d.Mesh.NATPortMap, d.Mesh.AutoRelay, d.Mesh.HolePunching, d.Mesh.RelayService)
	}
}
