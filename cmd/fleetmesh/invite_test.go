package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
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

// typo changes one character of a code's data part to another bech32
// character.
func typo(code string) string {
	b := []byte(code)
	if b[30] == 'q' {
		b[30] = 'p'
	} else {
		b[30] = 'q'
	}
	return string(b)
}

func TestJoinPeers(t *testing.T) {
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr := "/ip4/198.51.100.7/tcp/4001/p2p/" + k.PeerID().String()
	good, err := invite.New(k, []string{addr}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name  string
		join  []string
		want  []string
		usage bool
		err   error
	}{
		{"code", []string{good}, []string{addr}, false, nil},
		{"link", []string{invite.Link(good)}, []string{addr}, false, nil},
		{"changed code", []string{typo(good)}, nil, false, invite.ErrMalformed},
		{"unreachable relay", []string{"ws://127.0.0.1:1"}, nil, false, nil},
		{"plain ws to the network", []string{"ws://198.51.100.7:7447"}, nil, true, nil},
		{"neither", []string{"198.51.100.7:4001"}, nil, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := joinPeers(context.Background(), c.join, "", log)
			switch {
			case c.usage:
				if !errors.Is(err, errUsage) {
					t.Fatalf("joinPeers = %v, %v; want a usage error", got, err)
				}
			case c.err != nil:
				if !errors.Is(err, c.err) {
					t.Fatalf("joinPeers = %v, %v; want %v", got, err, c.err)
				}
			case err != nil || strings.Join(got, " ") != strings.Join(c.want, " "):
				t.Fatalf("joinPeers = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
