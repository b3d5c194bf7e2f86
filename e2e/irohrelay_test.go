//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// irohHomeConfig is a home node of the iroh relay test: no libp2p at all
// (it listens nowhere and knows no peers), iroh with only the anchor's
// relay and the other home's EndpointId, no address.
const irohHomeConfig = `class = "home"

[relay]
events_per_second = 0
ip_events_per_second = 0

[mesh]
listen = []
mdns = false
dht = "off"
sync_interval = "1s"
lookup_peers = 0

[iroh]
helper_dir = %q
relays = [%q]
peers = [%q]
`

// TestIrohThroughAnchorRelay: two homes behind their own NAT routers, with
// libp2p off, reach each other over iroh through the iroh relay of an
// anchor on the lab internet (the only relay either knows; neither knows
// the other's address), and an event published at one is served by the
// other. It reports whether iroh's connection became direct (hole
// punched) or stayed on the relay: both are valid outcomes. The event can
// only have travelled over iroh: the homes have no libp2p, and know no
// address of each other, only the relay.
func TestIrohThroughAnchorRelay(t *testing.T) {
	needNode(t)
	lab, anchorNS, _, _, homeA, homeB := newNATTopology(t)
	helper := filepath.Join(moduleRoot, "iroh", "helper")
	relayURL := "http://" + labAnchorIP + ":7447/"

	anchorHome := newHome(t, fmt.Sprintf("class = \"anchor\"\n[mesh]\nmdns = false\ndht = \"off\"\n[iroh]\nhelper_dir = %q\n", helper))
	anchor, err := startNodeCmd(t, anchorHome, exec.Command("ip", "netns", "exec", anchorNS, binary, "run", "--home", anchorHome, "--listen", labAnchorIP+":7447"))
	if err != nil {
		t.Fatal(err)
	}
	// Homes first, for their ids; then their configs name each other.
	ha, hb := newHome(t, ""), newHome(t, "")
	ida, idb := runID(t, ha).EndpointID, runID(t, hb).EndpointID
	writeConfig := func(home, cfg string) {
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(ha, fmt.Sprintf(irohHomeConfig, helper, relayURL, idb))
	writeConfig(hb, fmt.Sprintf(irohHomeConfig, helper, relayURL, ida))
	start := func(home, ns string) *labNode {
		n, err := startNodeCmd(t, home, exec.Command("ip", "netns", "exec", ns, binary, "run", "--home", home, "--listen", labRelayListen))
		if err != nil {
			t.Fatal(err)
		}
		return &labNode{node: n, ns: ns, lab: lab}
	}
	a, b := start(ha, homeA), start(hb, homeB)
	t0 := time.Now()
	deadline := t0.Add(90 * time.Second)

	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := u.sign(1, randomContent("over iroh through the anchor's relay"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	c, err := a.ws(ctx)
	cancel()
	if err != nil {
		t.Fatalf("connect to home A: %v", err)
	}
	ok, err := publishOne(c, ev)
	c.Close()
	if err != nil || !ok.Accepted {
		t.Fatalf("publish at home A: %+v %v", ok, err)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok, err := b.serves(ctx, ev.ID)
		cancel()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("home B never served the event (last err %v)\n=== anchor\n%s\n=== home A\n%s\n=== home B\n%s", err, anchor.output(), a.output(), b.output())
		}
		time.Sleep(500 * time.Millisecond)
	}
	arrived := time.Since(t0)
	// Give iroh's hole punching a moment, then read the paths.
	time.Sleep(5 * time.Second)
	paths := map[string]string{}
	for name, n := range map[string]*labNode{"home A": a, "home B": b} {
		paths[name] = irohPaths(t, n)
	}
	resp, err := lab.httpClient(anchorNS).Get(relayURL + "ping")
	if err != nil {
		t.Fatalf("anchor /ping: %v", err)
	}
	resp.Body.Close()
	report := fmt.Sprintf("iroh relay: home A -> home B over iroh, both behind NAT, libp2p off; event arrived %s after start\n  iroh connections by path: home A %s; home B %s",
		arrived.Round(100*time.Millisecond), paths["home A"], paths["home B"])
	if !strings.Contains(paths["home A"], `{path="direct"} 0`) || !strings.Contains(paths["home B"], `{path="direct"} 0`) {
		report += "\n  path: DIRECT (iroh hole punched through both NATs after meeting at the relay)"
	} else {
		report += "\n  path: RELAYED through the anchor's iroh relay"
	}
	t.Log(report)
	fmt.Println(report)
}

var irohConnLine = regexp.MustCompile(`(?m)^fleetmesh_iroh_connections\{path="[a-z]+"\} [0-9]+$`)

// irohPaths is the fleetmesh_iroh_connections lines of n's /metrics.
func irohPaths(t *testing.T, n *labNode) string {
	t.Helper()
	hc := n.lab.httpClient(n.ns)
	resp, err := hc.Get("http://" + labRelayListen + "/metrics")
	if err != nil {
		return "metrics: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Join(irohConnLine.FindAllString(string(body), -1), ", ")
}
