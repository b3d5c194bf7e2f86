package e2e

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMeshPortHeld starts a node on a fixed mesh TCP port and a second
// node on the same one: the second must exit before serving, with a
// message naming the address (libp2p's TCP port reuse let both listen).
func TestMeshPortHeld(t *testing.T) {
	needBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cfg := nodeConfig(nil)
	first, err := tryStartNode(t, newHome(t, cfg), "127.0.0.1:0", "--mesh-listen", addr)
	if err != nil {
		t.Fatal(err)
	}
	second, err := tryStartNode(t, newHome(t, cfg), "127.0.0.1:0", "--mesh-listen", addr)
	if err == nil {
		t.Fatalf("a second node started on mesh address %s\n%s", addr, second.output())
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("the second node's failure does not name %s as in use: %v", addr, err)
	}
	if err := first.stop(); err != nil {
		t.Fatalf("the first node: %v\n%s", err, first.output())
	}
}

// TestDefaultMeshPorts: a home made by `fleetmesh init` and run as the
// README says listens for the mesh on TCP and QUIC port 4001 and prints
// its mesh lines; a second such node on the same machine, finding 4001
// taken, listens on free ports instead and says so, rather than refusing
// to start as it does for an address its operator chose (TestMeshPortHeld).
func TestDefaultMeshPorts(t *testing.T) {
	needBinary(t)
	free := true
	if ln, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", 4001)); err != nil {
		free = false // another process holds it: only the fallback is checked
	} else {
		ln.Close()
	}
	meshLines := func(n *node) []string {
		t.Helper()
		for deadline := time.Now().Add(startTimeout); ; {
			var lines []string
			for _, l := range strings.Split(n.stdout.String(), "\n") {
				if a, ok := strings.CutPrefix(l, "mesh "); ok {
					lines = append(lines, a)
				}
			}
			if len(lines) >= 2 || time.Now().After(deadline) {
				return lines
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := startNode(t, newHome(t, ""))
	a := meshLines(first)
	if !slices.ContainsFunc(a, func(s string) bool { return strings.Contains(s, "/tcp/") }) || !slices.ContainsFunc(a, func(s string) bool { return strings.Contains(s, "/quic-v1/") }) {
		t.Fatalf("a default node printed no TCP and QUIC mesh lines: %q\n%s", a, first.output())
	}
	if free && !slices.ContainsFunc(a, func(s string) bool { return strings.Contains(s, "/tcp/4001/") }) {
		t.Fatalf("a default node on a machine with 4001 free does not listen on it: %q", a)
	}
	second := startNode(t, newHome(t, ""))
	b := meshLines(second)
	if len(b) < 2 || slices.ContainsFunc(b, func(s string) bool { return strings.Contains(s, "/tcp/4001/") }) {
		t.Fatalf("the second default node's mesh lines: %q, want TCP and QUIC on ports other than 4001\n%s", b, second.output())
	}
	if !strings.Contains(second.stderr.String(), "default listen address in use") {
		t.Fatalf("the second node did not say it moved off port 4001\n%s", second.output())
	}
}
