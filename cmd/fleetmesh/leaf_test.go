package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/identity"
)

// TestLeafOnce: `fleetmesh leaf --once` pairs with a running node from
// its invitation, does one wake, exits 0 and prints one JSON summary
// line with the fields scripts rely on; a second wake picks up what was
// sent to it meanwhile.
func TestLeafOnce(t *testing.T) {
	bin := buildFleetmesh(t)
	anchorHome, leafHome, senderHome := t.TempDir(), t.TempDir(), t.TempDir()
	if _, _, err := identity.LoadOrCreateKey(filepath.Join(senderHome, "node.key")); err != nil {
		t.Fatal(err)
	}
	anchor := startAnchor(t, bin, anchorHome, "127.0.0.1:0")
	url := "http://" + anchor.addr + "/didcomm"
	inv := strings.TrimSpace(runBin(t, bin, "", "didcomm", "invite", "--home", anchorHome, "--endpoint", url))
	wake := func() map[string]any {
		out := runBin(t, bin, "", "leaf", "--home", leafHome, "--pair", inv, "--subscribe", `{"kinds":[1]}`, "--once", "--budget", "20s")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 1 {
			t.Fatalf("leaf --once printed %d lines: %q", len(lines), out)
		}
		var s map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &s); err != nil {
			t.Fatalf("summary %q: %v", lines[0], err)
		}
		for _, k := range []string{"picked_up", "events_fetched", "outbox_sent", "duration_ms", "caught_up"} {
			if _, ok := s[k]; !ok {
				t.Fatalf("summary %s has no %q", lines[0], k)
			}
		}
		if s["caught_up"] != true {
			t.Fatalf("wake not caught up: %s", lines[0])
		}
		return s
	}
	wake()
	leafKey, err := identity.LoadKey(filepath.Join(leafHome, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		runBin(t, bin, fmt.Sprintf(`{"type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":"%d"}}`, i),
			"didcomm", "send", "--home", senderHome, "--to", leafKey.DID(), "--via", url)
	}
	if s := wake(); s["picked_up"] != float64(3) {
		t.Fatalf("second wake picked up %v, want 3", s["picked_up"])
	}
}
