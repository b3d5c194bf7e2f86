package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/invite"
)

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
	good, err := invite.New(k, []string{addr}, "", time.Now().Add(time.Hour))
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
			got, err := joinPeers(context.Background(), c.join, "", nil, log)
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

// TestRunRefusesPlainAnnounceRelay: an announce relay over plain ws://
// across the network stops the start, naming the key.
func TestRunRefusesPlainAnnounceRelay(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := runCLI(t, "", "init", "--home", dir); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	cfg := config.Default()
	cfg.Mesh.AnnounceRelays = []string{"ws://198.51.100.7:7447"}
	cfg.Mesh.MDNS = setting.Off // no multicast on the machine's network
	data, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, config.FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "", "run", "--home", dir, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errs, "announce_relays") {
		t.Fatalf("run with a ws:// announce relay: exit %d, stderr %q", code, errs)
	}
}
