package iroh

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// helperPID finds the helper process the endpoint runs: the node process
// whose environment names the endpoint's socket.
func helperPID(t *testing.T, e *Endpoint) int {
	t.Helper()
	out, err := exec.Command("pgrep", "-f", "helper.mjs").Output()
	if err != nil {
		t.Fatalf("pgrep: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		env, err := os.ReadFile("/proc/" + f + "/environ")
		if err == nil && strings.Contains(string(env), "FLEETMESH_IROH_SOCK="+e.path+"\x00") {
			return pid
		}
	}
	t.Fatal("no helper process for this endpoint")
	return 0
}

// TestHelperKill9: a helper killed with SIGKILL is noticed and restarted
// with the same EndpointId, and a peer reaches the node again.
func TestHelperKill9(t *testing.T) {
	key, _ := identity.GenerateKey()
	ready := make(chan Info, 8)
	e, err := Start(Config{
		Key: key, Node: "node", HelperDir: helperDir(t), SocketDir: t.TempDir(),
		Bind:     []string{"127.0.0.1:0"},
		Handlers: map[string]Handler{testALPN: answer},
		OnReady:  func(i Info) { ready <- i },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	peerKey, _ := identity.GenerateKey()
	p, err := Start(Config{
		Key: peerKey, Node: "node", HelperDir: helperDir(t), SocketDir: t.TempDir(),
		Bind:     []string{"127.0.0.1:0"},
		Handlers: map[string]Handler{testALPN: answer},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	exchange := func(info Info) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := p.Dial(ctx, Addr{ID: info.ID, Addrs: []string{loopback(info.Addrs)}}, testALPN)
		if err != nil {
			return err
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(20 * time.Second))
		s.Write([]byte("ping"))
		s.CloseWrite()
		// A stream that breaks reads as a short stream: the protocols
		// above frame their messages and see it so.
		got, err := io.ReadAll(s)
		if err == nil && string(got) != "go got: ping" {
			return fmt.Errorf("answer %q", got)
		}
		return err
	}
	for round := range 2 {
		var info Info
		select {
		case info = <-ready:
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: the helper did not serve", round)
		}
		if info.ID != key.EndpointID() {
			t.Fatalf("round %d: EndpointId %s, want %s", round, info.ID, key.EndpointID())
		}
		// The peer may still hold the connection the kill broke: a dial
		// fails until it notices, then succeeds.
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, up := p.Info(); up {
				if err = exchange(info); err == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no exchange after restart: %v", round, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if round == 0 {
			if err := syscall.Kill(helperPID(t, e), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := e.Stats(); st.Restarts != 1 {
		t.Fatalf("restarts %d, want 1", st.Restarts)
	}
}
