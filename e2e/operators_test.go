//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
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
// the relay behind its TLS proxy. The script is given the linux/amd64
// release archive (scripts/release-archive.sh around the binary under
// test), so the anchor runs iroh too, its helper beside the executable in
// /opt/fleetmesh.
func TestAnchorPage(t *testing.T) {
	needNode(t)
	archive := filepath.Join(t.TempDir(), "fleetmesh-test-linux-amd64.tar.gz")
	if out, err := exec.Command("bash", filepath.Join(moduleRoot, "scripts", "release-archive.sh"), binary, "linux/amd64", archive).CombinedOutput(); err != nil {
		t.Fatalf("release-archive.sh: %v\n%s", err, out)
	}
	lab, vps, homeNS, _, _ := newNATLab(t)
	script := filepath.Join(moduleRoot, "scripts", "anchor-vps.sh")
	cmd := exec.Command("ip", "netns", "exec", vps, "unshare", "--mount", "--propagation", "private",
		"env", "FLEETMESH_LAB=1", "bash", script, archive, "wss://relay.example.org")
	n, err := startNodeCmd(t, "/var/lib/fleetmesh", cmd)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(startTimeout); !strings.Contains(n.stdout.String(), "\niroh "); {
		if time.Now().After(deadline) {
			t.Fatalf("the anchor installed from the archive printed no iroh line\n%s", n.output())
		}
		time.Sleep(50 * time.Millisecond)
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
	id := home.publish(t, u, randomContent("from a home behind NAT to the anchor"))
	anchor.waitServes(t, id, natTestBudget, home)
}

// TestPiPage follows docs/operators.md's "A home node on a Raspberry Pi"
// with scripts/pi-home.sh in a lab namespace (as TestAnchorPage does, with
// the host's binary standing in for the arm64 build): the node runs as the
// unit and its Pi drop-in say, with the Go memory limit in its environment
// and in force in its runtime, the page's config keys, and a way into the
// mesh: an event published at it is served by the peer it was given.
func TestPiPage(t *testing.T) {
	needBinary(t)
	lab := newNetLab(t)
	peerNS, piNS := lab.addNS("peer"), lab.addNS("pi")
	lab.veth(peerNS, "eth0", piNS, "eth0")
	const peerIP = "10.77.5.1"
	lab.addr(peerNS, "eth0", peerIP+"/24")
	lab.addr(piNS, "eth0", "10.77.5.2/24")
	peer := startLabNode(t, lab, peerNS)

	script := filepath.Join(moduleRoot, "scripts", "pi-home.sh")
	boot := fmt.Sprintf("/ip4/%s/tcp/4001/p2p/%s", peerIP, peer.peerID)
	cmd := exec.Command("ip", "netns", "exec", piNS, "unshare", "--mount", "--propagation", "private",
		"env", "FLEETMESH_LAB=1", "bash", script, binary, boot)
	n, err := startNodeCmd(t, "/var/lib/fleetmesh", cmd)
	if err != nil {
		t.Fatal(err)
	}
	pi := &labNode{node: n, ns: piNS, lab: lab}

	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", n.cmd.Process.Pid))
	if err != nil || !strings.Contains(string(env), "\x00GOMEMLIMIT=320MiB\x00") && !strings.HasPrefix(string(env), "GOMEMLIMIT=320MiB\x00") {
		t.Fatalf("the Pi's node runs without GOMEMLIMIT=320MiB (%v): %q", err, env)
	}
	resp, err := lab.httpClient(piNS).Get("http://" + labRelayListen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), fmt.Sprintf("go_gc_gomemlimit_bytes %d\n", 320<<20)) &&
		!strings.Contains(string(body), "go_gc_gomemlimit_bytes 3.3554432e+08\n") {
		t.Fatalf("the node's runtime does not hold the 320 MiB limit; its /metrics:\n%s", grepLines(string(body), "gomemlimit"))
	}

	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	id := pi.publish(t, u, randomContent("from a Raspberry Pi"))
	peer.waitServes(t, id, 60*time.Second, pi)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestUpgradePage follows docs/operators.md's "Upgrades" with
// scripts/upgrade.sh: the installed build backs up the running node, the
// node stops cleanly on SIGTERM, the binary is replaced, and the node
// started from the new one serves what it stored before. (Both builds are
// this one; a store of the previous release's format opening in this build
// is store's TestOpensPreviousRelease.)
func TestUpgradePage(t *testing.T) {
	home := newHome(t, nodeConfig(nil))
	installed := filepath.Join(t.TempDir(), "fleetmesh")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(installed, data, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() *meshNode {
		t.Helper()
		n, err := startNodeCmd(t, home, exec.Command(installed, "run", "--home", home, "--listen", "127.0.0.1:0", "--mesh-listen", "/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		return &meshNode{node: n}
	}
	old := run()
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 20 {
		ids = append(ids, publishAt(t, old, u, randomContent(fmt.Sprintf("before the upgrade %d", i))))
	}

	backups := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(moduleRoot, "scripts", "upgrade.sh"), binary, home)
	cmd.Env = append(os.Environ(), "FLEETMESH_LAB=1", "FLEETMESH_BIN="+installed, "FLEETMESH_BACKUPS="+backups)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "through the running node") || !strings.Contains(string(out), "to go back: scripts/restore.sh") {
		t.Fatalf("upgrade.sh: %v\n%s\n%s", err, out, old.output())
	}
	select {
	case <-old.exited:
		if old.err != nil {
			t.Fatalf("the node stopped for the upgrade with %v\n%s", old.err, old.output())
		}
	case <-time.After(stopTimeout):
		t.Fatal("upgrade.sh returned with the node still running")
	}
	if m, _ := filepath.Glob(filepath.Join(backups, "before-upgrade-*", "fleetmesh-backup.json")); len(m) != 1 {
		t.Fatalf("upgrade.sh left no backup in %s", backups)
	}
	upgraded := run()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	found, err := fetchIDs(ctx, upgraded.url, ids, 100)
	if err != nil || len(found) != len(ids) {
		t.Fatalf("after the upgrade the node serves %d of %d events (%v)\n%s", len(found), len(ids), err, upgraded.output())
	}
}
