package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// peerScript is the unmodified @number0/iroh endpoint of the iroh
// package's interop tests; `npm install --no-save` in iroh/helper installs the binding.
func peerScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "helper", "interop", "peer.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("..", "helper", "node_modules", "@number0", "iroh")); err != nil {
		t.Fatalf("@number0/iroh is not installed: run `npm install --no-save` in iroh/helper (%v)", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("Node.js is needed for the interop test: %v", err)
	}
	return p
}

// TestIrohEndpointsThroughRelay: two unmodified iroh endpoints, each with
// only this relay (RelayMode.customFromUrls), the dialler knowing no
// direct address of the other, exchange a message; the relay must have
// authenticated both and forwarded their QUIC datagrams. Whether the path
// then became direct (iroh's hole punching on loopback) is reported, not
// asserted: spec/iroh.md's namespace test is the one behind NAT.
func TestIrohEndpointsThroughRelay(t *testing.T) {
	script := peerScript(t)
	s := New(Limits{}, nil)
	mux := http.NewServeMux()
	s.Mount(mux)
	srv := httptest.NewServer(mux)
	defer func() { srv.CloseClientConnections(); srv.Close(); s.Close() }()
	relayURL := srv.URL + "/"

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	env := append(os.Environ(), "FLEETMESH_IROH_RELAY="+relayURL, "FLEETMESH_PEER_WAIT_DIRECT=3")
	const alpn = "/fleetmesh/didcomm/1.0.0"
	serve := exec.CommandContext(ctx, "node", script, "serve", alpn)
	serve.Env = env
	serve.Stderr = os.Stderr
	out, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Wait()
	defer serve.Process.Kill()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("serve printed nothing: %v", lines.Err())
	}
	var served struct{ ID string }
	if err := json.Unmarshal(lines.Bytes(), &served); err != nil {
		t.Fatalf("serve: %q: %v", lines.Text(), err)
	}

	dial := exec.CommandContext(ctx, "node", script, "dial", served.ID, "", alpn, "through the relay")
	dial.Env = env
	dial.Stderr = os.Stderr
	got, err := dial.Output()
	if err != nil {
		t.Fatalf("dial: %v: %s", err, got)
	}
	var res struct {
		Got, Path, Error string
		PathLater        string `json:"path_later"`
	}
	if err := json.Unmarshal(got, &res); err != nil {
		t.Fatalf("dial printed %q: %v", got, err)
	}
	if res.Error != "" || res.Got != "js got: through the relay" {
		t.Fatalf("dial: %+v", res)
	}
	st := s.Stats()
	if st.Accepted < 2 || st.DatagramFrames == 0 {
		t.Fatalf("the relay did not carry the connection: %+v", st)
	}
	t.Logf("relay stats %+v; path at the answer %s, after up to 3 s %s", st, res.Path, res.PathLater)
}
