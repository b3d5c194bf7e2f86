//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAnchorPage follows docs/operators.md's "An anchor on a VPS" with
// scripts/anchor-vps.sh in the NAT lab: the script runs in the lab's public
// "VPS" namespace (and a private mount namespace, so the user it adds and
// the files it installs vanish with it), as root, and starts the anchor the
// way deploy/fleetmesh.service would. A home node behind NAT, given only
// the anchor's public mesh address, then publishes an event, and the
// anchor serves it to a client on its loopback relay, where the page puts
// the relay behind its TLS proxy.
func TestAnchorPage(t *testing.T) {
	needBinary(t)
	lab, vps, homeNS, _, _ := newNATLab(t)
	script := filepath.Join(moduleRoot, "scripts", "anchor-vps.sh")
	cmd := exec.Command("ip", "netns", "exec", vps, "unshare", "--mount", "--propagation", "private",
		"env", "FLEETMESH_LAB=1", "bash", script, binary, "wss://relay.example.org")
	n, err := startNodeCmd(t, "/var/lib/fleetmesh", cmd)
	if err != nil {
		t.Fatal(err)
	}
	// The relay line comes first; the peer_id and mesh lines may follow it.
	var peerID string
	for deadline := time.Now().Add(startTimeout); peerID == "" || !strings.Contains(n.stdout.String(), "/tcp/4001/p2p/"); {
		for _, line := range strings.Split(n.stdout.String(), "\n") {
			if p, ok := strings.CutPrefix(line, "peer_id "); ok {
				peerID = strings.TrimSpace(p)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the anchor printed no peer_id line or no mesh line on port 4001\n%s", n.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	anchor := &labNode{node: n, ns: vps, peerID: peerID, lab: lab}
	home := startLabNode(t, lab, homeNS, fmt.Sprintf("/ip4/%s/tcp/4001/p2p/%s", labAnchorIP, peerID))

	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := u.sign(1, randomContent("from a home behind NAT to the anchor"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	c, err := home.ws(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	ok, err := publishOne(c, ev)
	c.Close()
	if err != nil || !ok.Accepted {
		t.Fatalf("publish at the home node: %+v %v", ok, err)
	}
	for deadline := time.Now().Add(natTestBudget); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok, err := anchor.serves(ctx, ev.ID)
		cancel()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the anchor never served the home node's event (last: %v)\n--- anchor:\n%s\n--- home:\n%s", err, anchor.output(), home.output())
		}
		time.Sleep(500 * time.Millisecond)
	}
}
