package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bounds on process handling. None is asserted as a duration: they only
// keep a broken node from hanging the suite.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 45 * time.Second
	cliTimeout   = 30 * time.Second
)

// lockedBuffer collects a process's output for failure messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cli runs a fleetmesh subcommand to completion and returns stdout, stderr
// and the error (an *exec.ExitError for a non-zero exit).
func cli(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// newHome makes a node home with `fleetmesh init` and, if config is not
// empty, replaces its config.toml with config. Unless config sets mdns
// itself, the home's mDNS is off (withoutMDNS).
func newHome(t *testing.T, config string) string {
	t.Helper()
	needBinary(t)
	home := filepath.Join(t.TempDir(), "home")
	if out, errOut, err := cli(t, "init", "--home", home); err != nil {
		t.Fatalf("fleetmesh init: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	path := filepath.Join(home, "config.toml")
	if config == "" {
		written, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		config = mdnsLine.ReplaceAllString(string(written), "mdns = 'off'")
	}
	if err := os.WriteFile(path, []byte(withoutMDNS(config)), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// mdnsLine is the mdns key's line in a config file.
var mdnsLine = regexp.MustCompile(`(?m)^mdns\s*=.*$`)

// withoutMDNS turns mDNS off in a config that does not set it. mDNS is on
// by default for home-class nodes (class home, and class auto until found
// public), and would multicast on the machine's own network and let the
// nodes of unrelated tests on one host find each other; only a test about
// mDNS sets it, and runs its nodes in a lab namespace.
func withoutMDNS(config string) string {
	if mdnsLine.MatchString(config) {
		return config
	}
	mesh := regexp.MustCompile(`(?m)^\[mesh\]\s*$`)
	if loc := mesh.FindStringIndex(config); loc != nil {
		return config[:loc[1]] + "\nmdns = 'off'" + config[loc[1]:]
	}
	return config + "\n[mesh]\nmdns = 'off'\n"
}

// node is a running `fleetmesh run` process.
type node struct {
	t      *testing.T
	home   string
	cmd    *exec.Cmd
	url    string // ws://127.0.0.1:PORT
	did    string
	stdout *lockedBuffer
	stderr *lockedBuffer
	exited chan struct{}
	err    error // exit status, valid once exited is closed
}

// startNode runs `fleetmesh run --home home --listen 127.0.0.1:0` and waits
// for the `relay ws://…` line. The node is killed when the test ends if it
// is still running.
func startNode(t *testing.T, home string) *node {
	t.Helper()
	n, err := tryStartNode(t, home, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(n.url, "ws://127.0.0.1:") {
		t.Fatalf("fleetmesh run printed relay URL %q, want ws://127.0.0.1:PORT\n%s", n.url, n.output())
	}
	return n
}

// startNodeOnFreePort is startNode for a node whose config sets a public
// relay url, which `run` prints instead of the listen address: it picks a
// free loopback port itself and connects there.
func startNodeOnFreePort(t *testing.T, home string) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n, err := tryStartNode(t, home, addr)
	if err != nil {
		t.Fatal(err)
	}
	n.url = "ws://" + addr
	return n
}

// startWatched starts cmd with its stderr in stderr and its stdout copied
// line by line into stdout. The returned channel yields the URL of the
// first `relay URL` line; once the process has exited and its output is
// read, *errp holds its exit status and exited is closed.
func startWatched(cmd *exec.Cmd, stdout, stderr *lockedBuffer, errp *error, exited chan struct{}) (<-chan string, error) {
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	readDone := make(chan struct{})
	go func() {
		// Owned by the process: ends when its stdout closes at exit.
		defer close(readDone)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			stdout.Write([]byte(line + "\n"))
			if u, ok := strings.CutPrefix(line, "relay "); ok {
				select {
				case ready <- strings.TrimSpace(u):
				default:
				}
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	go func() {
		// Owned by the process: ends when it exits. Wait must follow the
		// last read of stdout.
		<-readDone
		*errp = cmd.Wait()
		close(exited)
	}()
	return ready, nil
}

func tryStartNode(t *testing.T, home string, listen string, extra ...string) (*node, error) {
	t.Helper()
	return startNodeCmd(t, home, exec.Command(binary, append([]string{"run", "--home", home, "--listen", listen}, extra...)...))
}

// startNodeCmd starts cmd, a `fleetmesh run` of home however it is wrapped,
// and waits for its `relay URL` line; the node is killed when the test ends.
func startNodeCmd(t *testing.T, home string, cmd *exec.Cmd) (*node, error) {
	t.Helper()
	n := &node{t: t, home: home, cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	ready, err := startWatched(cmd, n.stdout, n.stderr, &n.err, n.exited)
	if err != nil {
		return nil, fmt.Errorf("start fleetmesh run: %w", err)
	}
	t.Cleanup(n.kill)
	select {
	case n.url = <-ready:
	case <-n.exited:
		return nil, fmt.Errorf("fleetmesh run exited before printing its relay URL: %v\n%s", n.err, n.output())
	case <-time.After(startTimeout):
		n.kill()
		return nil, fmt.Errorf("fleetmesh run printed no `relay URL` line within %s\n%s", startTimeout, n.output())
	}
	for _, line := range strings.Split(n.stdout.String(), "\n") {
		if d, ok := strings.CutPrefix(line, "did "); ok {
			n.did = strings.TrimSpace(d)
		}
	}
	return n, nil
}

func (n *node) output() string {
	return "--- stdout:\n" + n.stdout.String() + "--- stderr:\n" + n.stderr.String()
}

// httpURL is the node's HTTP base URL (same port as the relay).
func (n *node) httpURL() string { return "http://" + strings.TrimPrefix(n.url, "ws://") }

// kill sends SIGKILL and waits for the exit.
func (n *node) kill() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Kill()
	<-n.exited
}

// stop sends SIGTERM and waits for a graceful exit; it returns the exit
// error (nil for status 0).
func (n *node) stop() error {
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-n.exited:
		return n.err
	case <-time.After(stopTimeout):
		// A Go process prints every goroutine's stack on SIGQUIT: the
		// failure then shows where shutdown is stuck.
		n.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-n.exited:
		case <-time.After(stopTimeout):
			n.kill()
		}
		return fmt.Errorf("no exit within %s of SIGTERM (goroutine dump from SIGQUIT in stderr)", stopTimeout)
	}
}
