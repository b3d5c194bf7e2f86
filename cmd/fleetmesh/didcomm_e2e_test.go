package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
)

// The anchor in the end-to-end test is a separate process: this test
// binary re-executed with FLEETMESH_DIDCOMM_ANCHOR set, serving the node's
// agent.Service at /didcomm exactly as the node mounts it, and printing
// `relay ws://HOST:PORT` when listening as `fleetmesh run` does. It stops
// (closing the Service) on SIGTERM.
const anchorEnv = "FLEETMESH_DIDCOMM_ANCHOR"

func TestDIDCommAnchorProcess(t *testing.T) {
	spec := os.Getenv(anchorEnv)
	if spec == "" {
		t.Skip("helper process for TestDIDCommMediationAcrossRestart")
	}
	home, listen, _ := strings.Cut(spec, ",")
	if err := serveAnchor(home, listen); err != nil {
		fmt.Fprintln(os.Stderr, "anchor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveAnchor(home, listen string) error {
	k, _, err := identity.LoadOrCreateKey(filepath.Join(home, "node.key"))
	if err != nil {
		return err
	}
	svc, err := agent.New(k, home, nil)
	if err != nil {
		return err
	}
	defer svc.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/didcomm", svc)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	fmt.Printf("relay ws://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type anchorProc struct {
	cmd  *exec.Cmd
	addr string // HOST:PORT
	done chan error
}

// startAnchor starts the anchor process and waits for its relay line.
func startAnchor(t *testing.T, home, listen string) *anchorProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDIDCommAnchorProcess$")
	cmd.Env = append(os.Environ(), anchorEnv+"="+home+","+listen)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &anchorProc{cmd: cmd, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "relay ws://"); ok {
				lines <- addr
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	select {
	case p.addr = <-lines:
		return p
	case err := <-p.done:
		t.Fatalf("anchor exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("anchor did not print its relay line within 60s")
	}
	return nil
}

// stop ends the anchor with SIGTERM and waits for it.
func (p *anchorProc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Error("anchor did not stop on SIGTERM within 20s")
	}
}

// buildFleetmesh builds the binary once for the test.
func buildFleetmesh(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fleetmesh")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runBin(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fleetmesh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestDIDCommMediationAcrossRestart: an anchor mediates for a leaf that
// then goes offline; a sender forwards messages to it through the anchor;
// the anchor restarts; the leaf comes back and receives every message
// exactly once. Anchor, leaf and sender are separate processes.
func TestDIDCommMediationAcrossRestart(t *testing.T) {
	if os.Getenv(anchorEnv) != "" {
		t.Skip("inside the anchor helper")
	}
	bin := buildFleetmesh(t)
	anchorHome, leafHome, senderHome := t.TempDir(), t.TempDir(), t.TempDir()
	leafKey, _, err := identity.LoadOrCreateKey(filepath.Join(leafHome, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	senderKey, _, err := identity.LoadOrCreateKey(filepath.Join(senderHome, "node.key"))
	if err != nil {
		t.Fatal(err)
	}

	anchor := startAnchor(t, anchorHome, "127.0.0.1:0")
	url := "http://" + anchor.addr + "/didcomm"
	runBin(t, bin, "", "didcomm", "mediate", "--home", leafHome, "--mediator", url)
	// The leaf is offline from here on; the sender routes through the anchor.
	const n = 5
	var sent []string
	for i := 0; i < n; i++ {
		out := runBin(t, bin, fmt.Sprintf(`{"type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":"while you were away %d"}}`, i),
			"didcomm", "send", "--home", senderHome, "--to", leafKey.DID(), "--via", url)
		var r struct{ ID string }
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.ID == "" {
			t.Fatalf("send printed %q: %v", out, err)
		}
		sent = append(sent, r.ID)
	}

	anchor.stop(t)
	anchor = startAnchor(t, anchorHome, anchor.addr) // same address after the restart

	out := runBin(t, bin, "", "didcomm", "pickup", "--home", leafHome, "--mediator", url, "--limit", "2")
	got := pickedUp(t, out, senderKey.DID())
	if len(got) != n {
		t.Fatalf("leaf received %d distinct messages, want %d: %v", len(got), n, got)
	}
	for _, id := range sent {
		if got[id] != 1 {
			t.Fatalf("message %s received %d times", id, got[id])
		}
	}
	if out := runBin(t, bin, "", "didcomm", "pickup", "--home", leafHome, "--mediator", url); strings.TrimSpace(out) != "" {
		t.Fatalf("second pickup delivered again: %s", out)
	}
}
