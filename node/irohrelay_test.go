package node

import (
	"net/http"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config"
)

func TestIrohRelayURL(t *testing.T) {
	for _, c := range []struct{ configured, nostr, want string }{
		{"", "wss://anchor.example/nostr?x=1", "https://anchor.example/"},
		{"", "ws://127.0.0.1:7447/", "http://127.0.0.1:7447/"},
		{"https://relay.example/", "ws://127.0.0.1:7447/", "https://relay.example/"},
		{"", "https://odd.example/", ""},
		{"", "", ""},
	} {
		if got := irohRelayURL(c.configured, c.nostr); got != c.want {
			t.Errorf("irohRelayURL(%q, %q) = %q, want %q", c.configured, c.nostr, got, c.want)
		}
	}
}

// TestNodeUsesAnchorRelay: an anchor serves /relay; a home node does not;
// a node whose [iroh] relays names the anchor has its helper (the
// unmodified @number0/iroh endpoint) take it as its home relay.
func TestNodeUsesAnchorRelay(t *testing.T) {
	anchor := startIrohNodeWith(t, func(c *config.Config) { c.Class = config.ClassAnchor })
	home := startIrohNodeWith(t, func(c *config.Config) { c.Class = config.ClassHome })
	url := irohRelayURL("", anchor.n.RelayURL())
	for _, c := range []struct {
		n    *irohNode
		want int
	}{{anchor, http.StatusOK}, {home, http.StatusNotFound}} {
		resp, err := http.Get(irohRelayURL("", c.n.n.RelayURL()) + "ping")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET /ping: %d, want %d", resp.StatusCode, c.want)
		}
	}
	user := startIrohNodeWith(t, func(c *config.Config) { c.Iroh.Relays = []string{url} })
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := user.n.Iroh()
		if info.Relay != "" && anchor.n.irohRelay.Stats().Clients >= 1 {
			t.Logf("home relay %s; anchor relay %+v", info.Relay, anchor.n.irohRelay.Stats())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node's helper did not take the anchor's relay: relay %q, anchor %+v", info.Relay, anchor.n.irohRelay.Stats())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
