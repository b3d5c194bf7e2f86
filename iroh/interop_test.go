package iroh

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// testALPN is a fleetmesh protocol's ALPN; the interop tests carry their
// own messages over it, the node's tests the protocol's.
const testALPN = "/fleetmesh/didcomm/1.0.0"

// helperDir is the committed helper; its node_modules come from `npm ci`
// (scripts/test.sh runs it).
func helperDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("helper")
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(Config{Node: "node", HelperDir: dir}); err != nil {
		t.Fatalf("%v (scripts/test.sh runs `npm install --no-save` in iroh/helper)", err)
	}
	return dir
}

// startEndpoint starts an Endpoint whose handlers answer "go got: MSG".
func startEndpoint(t *testing.T, key *identity.Key) (*Endpoint, Info) {
	t.Helper()
	return startEndpointWith(t, key, Limits{})
}

// startEndpointWith is startEndpoint with limits.
func startEndpointWith(t *testing.T, key *identity.Key, limits Limits) (*Endpoint, Info) {
	t.Helper()
	ready := make(chan Info, 8)
	e, err := Start(Config{
		Key:       key,
		Node:      "node",
		HelperDir: helperDir(t),
		SocketDir: t.TempDir(),
		Bind:      []string{"127.0.0.1:0"},
		Handlers:  map[string]Handler{testALPN: answer},
		Limits:    limits,
		OnReady:   func(i Info) { ready <- i },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	select {
	case info := <-ready:
		return e, info
	case <-time.After(60 * time.Second):
		t.Fatal("the helper did not serve within 60s")
	}
	return nil, Info{}
}

// answer reads the whole stream and answers "go got: " and what it read.
func answer(s *Stream) {
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(s)
	if err != nil {
		return
	}
	s.Write([]byte("go got: " + string(got)))
	s.CloseWrite()
	io.Copy(io.Discard, s)
}

func jsPeer(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(helperDir(t), "interop", "peer.mjs")}, args...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

func loopback(addrs []string) string {
	for _, a := range addrs {
		if strings.HasPrefix(a, "127.0.0.1:") {
			return a
		}
	}
	return ""
}

// TestInteropJSDialsNode: an unmodified @number0/iroh endpoint dials the
// node by its EndpointId over a fleetmesh ALPN and exchanges a message
// both ways; the node sees the script's EndpointId as authenticated.
func TestInteropJSDialsNode(t *testing.T) {
	key, _ := identity.GenerateKey()
	e, info := startEndpoint(t, key)
	if info.ID != key.EndpointID() {
		t.Fatalf("helper serves EndpointId %s, the node's key is %s", info.ID, key.EndpointID())
	}
	addr := loopback(info.Addrs)
	if addr == "" {
		t.Fatalf("no loopback address in %v", info.Addrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := jsPeer(ctx, t, "dial", info.ID, addr, testALPN, "hello from js").Output()
	if err != nil {
		t.Fatalf("js dial: %v: %s", err, out)
	}
	var res struct{ Remote, Got string }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("js output %q: %v", out, err)
	}
	if res.Remote != key.EndpointID() || res.Got != "go got: hello from js" {
		t.Fatalf("js saw remote %s and answer %q", res.Remote, res.Got)
	}
	if st := e.Stats(); st.StreamsIn != 1 {
		t.Fatalf("streams in: %d, want 1", st.StreamsIn)
	}
}

// TestInteropNodeDialsJS: the node dials an unmodified @number0/iroh
// endpoint and exchanges a message both ways; a dial to the right address
// with a wrong EndpointId fails (raw-public-key TLS authenticates the id).
func TestInteropNodeDialsJS(t *testing.T) {
	key, _ := identity.GenerateKey()
	e, _ := startEndpoint(t, key)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := jsPeer(ctx, t, "serve", testALPN)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatal("js peer printed nothing")
	}
	var peer struct {
		ID    string
		Addrs []string
	}
	if err := json.Unmarshal(lines.Bytes(), &peer); err != nil {
		t.Fatal(err)
	}

	wrong, _ := identity.GenerateKey()
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	start := time.Now()
	s, err := e.Dial(dctx, Addr{ID: wrong.EndpointID(), Addrs: []string{loopback(peer.Addrs)}}, testALPN)
	dcancel()
	if err == nil {
		s.Close()
		t.Fatal("a dial to the wrong EndpointId at the peer's address succeeded")
	}
	t.Logf("wrong EndpointId: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	start = time.Now()

	s, err = e.Dial(ctx, Addr{ID: peer.ID, Addrs: []string{loopback(peer.Addrs)}}, testALPN)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("right EndpointId: stream after %v", time.Since(start).Round(time.Millisecond))
	if s.Remote() != peer.ID || s.ALPN() != testALPN {
		t.Fatalf("stream to %s over %s", s.Remote(), s.ALPN())
	}
	s.Write([]byte("hello from go"))
	s.CloseWrite()
	got, err := io.ReadAll(s)
	s.Close()
	if err != nil || string(got) != "js got: hello from go" {
		t.Fatalf("answer %q, %v", got, err)
	}
	if !lines.Scan() {
		t.Fatal("js peer did not report")
	}
	var seen struct{ Remote, ALPN, Got string }
	json.Unmarshal(lines.Bytes(), &seen)
	if seen.Remote != key.EndpointID() || seen.ALPN != testALPN || seen.Got != "hello from go" {
		t.Fatalf("js peer saw %+v", seen)
	}
}
