//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// mdnsNodeConfig is a LAN node's config in the mDNS lab: no bootstrap
// peer, no address book and no DHT peer, so mDNS is its only way to meet
// another node. mdns is written out because newHome otherwise turns it off.
const mdnsNodeConfig = `class = %q

[mesh]
mdns = %q
listen = ["/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"]
maintain_interval = "1s"
`

// mdnsTestBudget bounds how long the two mDNS nodes may take to meet.
const mdnsTestBudget = 60 * time.Second

// TestMDNSFindsHomeNodes runs three nodes on one lab LAN (a bridge in a
// namespace of its own; multicast does not work on loopback, which has no
// MULTICAST flag, and must not reach the machine's network). None has a
// bootstrap peer. A home node and a class-auto node (home while not found
// public) keep mDNS at its default and must find each other; a home node
// with mdns = 'off', started before them, must stay apart: it neither
// answers nor asks, so by the time the other two have met, it has still
// met nobody.
func TestMDNSFindsHomeNodes(t *testing.T) {
	needBinary(t)
	lab := newNetLab(t)
	lan := lab.addNS("lan")
	plug := lab.bridge(lan, "br0")
	ns := map[string]string{}
	for i, name := range []string{"off", "home", "auto"} {
		ns[name] = lab.addNS(name)
		port := "p-" + name
		lab.veth(lan, port, ns[name], "eth0")
		plug(port)
		lab.addr(ns[name], "eth0", fmt.Sprintf("10.77.9.%d/24", i+1))
	}
	off := startLabNodeWith(t, lab, ns["off"], fmt.Sprintf(mdnsNodeConfig, "home", "off"))
	home := startLabNodeWith(t, lab, ns["home"], fmt.Sprintf(mdnsNodeConfig, "home", "auto"))
	auto := startLabNodeWith(t, lab, ns["auto"], fmt.Sprintf(mdnsNodeConfig, "auto", "auto"))

	peers := func(n *labNode) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := n.debug(ctx)
		var out []string
		for _, c := range d.Connections {
			out = append(out, c.Peer)
		}
		return out, err
	}
	dump := func() string {
		var b strings.Builder
		for name, n := range map[string]*labNode{"off": off, "home": home, "auto": auto} {
			fmt.Fprintf(&b, "=== %s (%s):\n%s\n", name, n.peerID, n.output())
		}
		return b.String()
	}
	for deadline := time.Now().Add(mdnsTestBudget); ; {
		h, errH := peers(home)
		a, errA := peers(auto)
		if slices.Contains(h, auto.peerID) && slices.Contains(a, home.peerID) {
			if slices.Contains(h, off.peerID) || slices.Contains(a, off.peerID) {
				t.Fatalf("a node with mdns = 'off' was found: home's peers %v, auto's %v\n%s", h, a, dump())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the home and auto nodes never met by mDNS (home's peers %v %v, auto's %v %v)\n%s", h, errH, a, errA, dump())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if p, err := peers(off); err != nil || len(p) != 0 {
		t.Fatalf("the node with mdns = 'off' met %v (%v); it has no way in but mDNS\n%s", p, err, dump())
	}
	for name, n := range map[string]*labNode{"home": home, "auto": auto} {
		if !strings.Contains(n.stderr.String(), "mesh: mDNS started") {
			t.Errorf("the %s node did not log that mDNS started\n%s", name, dump())
		}
	}
	if strings.Contains(off.stderr.String(), "mDNS started") {
		t.Errorf("the node with mdns = 'off' started mDNS\n%s", dump())
	}
}
