package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/invite"
)

// inviteHome makes a home whose config listens on listen.
func inviteHome(t *testing.T, listen ...string) (string, *identity.Key) {
	t.Helper()
	dir := t.TempDir()
	if code, _, errs := runCLI(t, "", "init", "--home", dir); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	cfg := config.Default()
	cfg.Mesh.Listen = listen
	data, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, config.FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := identity.LoadKey(filepath.Join(dir, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, k
}

// TestInviteFromConfig: with no node running, the code carries the
// configured listen addresses that can be dialled, and it verifies.
func TestInviteFromConfig(t *testing.T) {
	dir, k := inviteHome(t, "/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/udp/0/quic-v1")
	code, out, errs := runCLI(t, "", "invite", "--home", dir, "--json", "--ttl", "2h")
	if code != 0 {
		t.Fatalf("invite: exit %d: %s", code, errs)
	}
	var got inviteOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("invite --json printed %q: %v", out, err)
	}
	want := "/ip4/127.0.0.1/tcp/4001/p2p/" + k.PeerID().String()
	if got.Source != "config" || len(got.Addrs) != 1 || got.Addrs[0] != want {
		t.Fatalf("invite from config: %+v, want only %s", got, want)
	}
	inv, err := invite.Parse(got.Link, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if inv.DID() != k.DID() || inv.Bootstrap()[0] != want || time.Until(inv.Expires) > 2*time.Hour {
		t.Fatalf("code decodes to %s %v expiring %s", inv.DID(), inv.Bootstrap(), inv.Expires)
	}
}

func TestInviteRefuses(t *testing.T) {
	dir, _ := inviteHome(t, "/ip4/127.0.0.1/tcp/0")
	for _, args := range [][]string{
		{"--ttl", "0s"},
		{"--ttl", "1000h"},
		{"--addr", "198.51.100.7:4001"},
		{}, // no running node and only port 0 configured
	} {
		code, _, errs := runCLI(t, "", append([]string{"invite", "--home", dir}, args...)...)
		if code == 0 || errs == "" {
			t.Errorf("invite %v: exit %d, stderr %q", args, code, errs)
		}
	}
	code, out, errs := runCLI(t, "", "invite", "--home", dir, "--addr", "/ip4/198.51.100.7/tcp/4001")
	if code != 0 || !strings.Contains(out, "link    fleetmesh:fmjoin1") || !strings.Contains(out, "█") {
		t.Fatalf("invite --addr: exit %d\n%s%s", code, out, errs)
	}
}
