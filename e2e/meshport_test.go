package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
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
