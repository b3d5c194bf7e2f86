package node

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/mesh"
)

func TestDeclaredClass(t *testing.T) {
	const (
		public  = network.ReachabilityPublic
		private = network.ReachabilityPrivate
		unknown = network.ReachabilityUnknown
	)
	for _, tc := range []struct {
		class string
		reach network.Reachability
		relay bool
		want  descriptor.Class
	}{
		{"auto", public, true, descriptor.ClassAnchor},
		{"", public, true, descriptor.ClassAnchor},
		// An anchor relays for others: public alone is not enough.
		{"auto", public, false, descriptor.ClassHome},
		{"auto", private, true, descriptor.ClassHome},
		{"auto", private, false, descriptor.ClassHome},
		{"auto", unknown, false, descriptor.ClassHome},
		// An explicit class is declared whatever AutoNAT finds.
		{"anchor", private, false, descriptor.ClassAnchor},
		{"home", public, true, descriptor.ClassHome},
		{"leaf", public, true, descriptor.ClassLeaf},
	} {
		got := declaredClass(tc.class, mesh.NATStatus{Reachability: tc.reach, RelayService: tc.relay})
		if got != tc.want {
			t.Errorf("class %q, %s, relaying %v: declares %s, want %s", tc.class, tc.reach, tc.relay, got, tc.want)
		}
	}
}

func TestMDNSMode(t *testing.T) {
	for _, tc := range []struct {
		class string
		mdns  setting.Switch
		want  mesh.MDNSMode
	}{
		{"home", setting.Auto, mesh.MDNSOn},
		{"auto", setting.Auto, mesh.MDNSWhilePrivate},
		{"anchor", setting.Auto, mesh.MDNSOff},
		{"leaf", setting.Auto, mesh.MDNSOff},
		{"home", setting.Switch{}, mesh.MDNSOn},
		{"home", setting.Off, mesh.MDNSOff},
		{"auto", setting.Off, mesh.MDNSOff},
		{"anchor", setting.On, mesh.MDNSOn},
		{"leaf", setting.On, mesh.MDNSOn},
	} {
		cfg := config.Default()
		cfg.Class, cfg.Mesh.MDNS = tc.class, tc.mdns
		if got := mdnsMode(cfg); got != tc.want {
			t.Errorf("class %q, mdns %v: mode %q, want %q", tc.class, tc.mdns, got, tc.want)
		}
	}
	if got := mdnsMode(config.Default()); got != mesh.MDNSWhilePrivate {
		t.Errorf("a new node's mDNS mode is %q, want %q (class auto: on while home)", got, mesh.MDNSWhilePrivate)
	}
}

func TestApplyNATConfig(t *testing.T) {
	for _, tc := range []struct {
		class, relayService string
		want                mesh.RelayMode
	}{
		{"auto", "auto", mesh.RelayAuto},
		{"anchor", "auto", mesh.RelayOn},
		{"home", "auto", mesh.RelayOff},
		{"leaf", "auto", mesh.RelayOff},
		{"home", "on", mesh.RelayOn},
		{"anchor", "off", mesh.RelayOff},
		{"auto", "on", mesh.RelayOn},
		{"auto", "off", mesh.RelayOff},
	} {
		cfg := config.Default()
		cfg.Class, cfg.Mesh.RelayService = tc.class, tc.relayService
		var mc mesh.Config
		applyNATConfig(&mc, cfg)
		if mc.RelayService != tc.want {
			t.Errorf("class %q, relay_service %q: relay mode %q, want %q", tc.class, tc.relayService, mc.RelayService, tc.want)
		}
	}
	cfg := config.Default()
	var mc mesh.Config
	applyNATConfig(&mc, cfg)
	want := mesh.DefaultRelayLimits()
	if mc.RelayLimits != want || mc.NATPortMap || mc.DisableAutoRelay || mc.DisableHolePunching || mc.RelaySearchInterval != 30*time.Second {
		t.Fatalf("the default config gives limits %+v (want %+v), port map %v, auto relay off %v, hole punching off %v, search %s",
			mc.RelayLimits, want, mc.NATPortMap, mc.DisableAutoRelay, mc.DisableHolePunching, mc.RelaySearchInterval)
	}
	if err := mc.Validate(); err != nil {
		t.Fatal(err)
	}
}
