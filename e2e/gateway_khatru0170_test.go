package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests in this file run the gateway against khatru v0.17.0
// (gateway/testdata/khatru-backend-v0170), whose parser answers any filter
// with limit, since or until, and every NEG-OPEN, with a NOTICE instead of
// EOSE: a real backend a gateway may meet (spec/gateway.md). Its bug stays.

var gwV0170Build = &testdataBuild{dir: "khatru-backend-v0170"}

func needBackendV0170(t *testing.T) string {
	t.Helper()
	return gwV0170Build.need(t)
}

func startBackendV0170(t *testing.T, flags ...string) *gwBackend {
	t.Helper()
	b := &gwBackend{addr: gwFreeAddr(t), data: filepath.Join(t.TempDir(), "khatru-data"), flags: flags}
	args := append([]string{"--listen", b.addr, "--data", b.data}, flags...)
	b.proc = gwStart(t, "khatru-v0.17.0", needBackendV0170(t), args...)
	return b
}

// gwHealth reads a node's /healthz.
func gwHealth(t *testing.T, relayURL string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + strings.TrimPrefix(relayURL, "ws://") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// servedByIDs waits until url serves every id, asking with a plain ids
// filter (no limit), which khatru v0.17.0 parses.
func servedByIDs(t *testing.T, what, url string, ids []string, procs ...*gwProc) {
	t.Helper()
	deadline := time.Now().Add(gwDeadline)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		got, err := query(ctx, url, map[string]any{"ids": ids})
		cancel()
		found := map[string]bool{}
		for _, e := range got {
			found[e.ID] = true
		}
		var missing []string
		for _, id := range ids {
			if !found[id] {
				missing = append(missing, id)
			}
		}
		if err == nil && len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, p := range procs {
				logs.WriteString(p.output())
			}
			t.Fatalf("%s: %d of %d events never arrived at %s (err %v)\n%s", what, len(missing), len(ids), url, err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestGatewayKhatruV0170 runs the gateway against a backend that cannot
// parse its REQs. Before the fix it reconnected every publish_timeout,
// carrying nothing to the mesh, with only INFO lines. Now it detects the
// NOTICE, says so once with the backend's words (log, /metrics, /healthz),
// degrades to plain filters and carries both ways on one connection: the
// backend's stored events (plain catch-up), its live events, and the
// mesh's events (published one at a time).
func TestGatewayKhatruV0170(t *testing.T) {
	backend := startBackendV0170(t)
	alice, _ := newUser()
	notes := func(prefix string, n int) []*event {
		out := make([]*event, n)
		for i := range out {
			out[i] = gwSignAt(alice, time.Now().Unix()-int64(i), 1, fmt.Sprintf("%s %d", prefix, i), nil)
		}
		return out
	}
	stored := notes("on the backend before the gateway", 5)
	gwMustPublish(t, backend.url(), stored, true, "")

	gw := startGateway(t, gwHome(t, ""), backend)
	gwWaitMetric(t, gw.url, "fleetmesh_gateway_backend_degraded", 1)
	servedByIDs(t, "backend → mesh, stored before (plain catch-up)", gw.url, gwIDs(stored), gw, backend.proc)

	live := notes("on the backend, live", 3)
	gwMustPublish(t, backend.url(), live, true, "")
	servedByIDs(t, "backend → mesh, live", gw.url, gwIDs(live), gw, backend.proc)

	fromMesh := notes("on the mesh", 4)
	gwMustPublish(t, gw.url, fromMesh, true, "")
	servedByIDs(t, "mesh → backend", backend.url(), gwIDs(fromMesh), gw, backend.proc)

	code, body := gwHealth(t, gw.url)
	if code != http.StatusOK || !strings.Contains(body, "degraded") || !strings.Contains(body, "failed to parse") {
		t.Errorf("/healthz = %d %q, want 200 naming the degradation in the backend's words (\"failed to parse ...\")", code, body)
	}
	if v := gwMetric(t, gw.url, `fleetmesh_gateway_backend_req_refusals_total{request="live",shape="full"}`); v < 1 {
		t.Errorf("live REQ refusals in the full shape = %v, want counted", v)
	}
	if v := gwMetric(t, gw.url, "fleetmesh_gateway_backend_refusing"); v != 0 {
		t.Errorf("backend_refusing = %v, want 0: the plain shape works", v)
	}
	// No reconnect loop: one connection carried all of it.
	if n := strings.Count(gw.stderr.String(), "connected to the backend"); n != 1 {
		t.Errorf("%d connections to the backend, want 1\n%s", n, gw.output())
	}
	if n := strings.Count(gw.stderr.String(), "degrading to plain filters"); n != 1 {
		t.Errorf("%d degradation warnings, want exactly one\n%s", n, gw.output())
	}
}

// TestGatewayKhatruV0170Refusing runs the gateway against a khatru v0.17.0
// that closes every REQ ("restricted:"): reads cannot be degraded any
// further. The gateway logs one ERROR with the backend's words however
// often it asks again, reports it in /metrics and /healthz (503), backs
// off, and still carries the mesh's events to the backend (its OKs).
func TestGatewayKhatruV0170Refusing(t *testing.T) {
	backend := startBackendV0170(t, "--refuse-reqs")
	gw := startGateway(t, gwHome(t, ""), backend)
	gwWaitMetric(t, gw.url, "fleetmesh_gateway_backend_refusing", 1)

	alice, _ := newUser()
	fromMesh := make([]*event, 4)
	for i := range fromMesh {
		fromMesh[i] = gwSignAt(alice, time.Now().Unix(), 1, fmt.Sprint("mesh while reads are refused ", i), nil)
	}
	gwMustPublish(t, gw.url, fromMesh, true, "")
	gwWaitMetric(t, gw.url, `fleetmesh_gateway_events_carried_total{direction="to_backend"}`, float64(len(fromMesh)))

	// Asked again on a new connection (retry_max is 1s here), refused
	// again: still one ERROR line.
	deadline := time.Now().Add(gwDeadline)
	for gwMetric(t, gw.url, `fleetmesh_gateway_backend_req_refusals_total{request="live",shape="plain"}`) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never asked again\n%s", gw.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, body := gwHealth(t, gw.url)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "restricted: this backend serves no reads") {
		t.Errorf("/healthz = %d %q, want 503 with the backend's words", code, body)
	}
	if n := strings.Count(gw.stderr.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines, want exactly one\n%s", n, gw.output())
	}
	if !strings.Contains(gw.stderr.String(), "restricted: this backend serves no reads") {
		t.Errorf("the ERROR does not carry the backend's words\n%s", gw.output())
	}
}

// TestGatewayKhatruV0170FullWalk is the created_at cursor's blind spot
// against a backend without NIP-77: an event stored on the mesh side with
// a created_at far older than the out cursor minus overlap, while the
// gateway was not running (as when a crash loses the queue it was in),
// lies outside every since window after it. The gateway's full walk
// compares the whole local store with the backend by id, in plain REQs
// khatru v0.17.0 parses, and publishes it. Before the walk it never
// crossed.
func TestGatewayKhatruV0170FullWalk(t *testing.T) {
	backend := startBackendV0170(t)
	home := gwHome(t, "")
	gw := startGateway(t, home, backend)
	gwWaitMetric(t, gw.url, `fleetmesh_gateway_catchups_total{direction="to_backend",method="since"}`, 1)
	gw.stop(t)
	// The gateway's node alone, on its home: what it stores is never
	// queued for the backend.
	n, err := tryStartNode(t, home, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := newUser()
	old := []*event{gwSignAt(alice, time.Now().Add(-48*time.Hour).Unix(), 1, "stored while the gateway was down, two days old", nil)}
	gwMustPublish(t, n.url, old, true, "")
	if err := n.stop(); err != nil {
		t.Fatalf("stop the node: %v\n%s", err, n.output())
	}

	gw = startGateway(t, home, backend)
	servedByIDs(t, "mesh → backend, older than the out cursor's window", backend.url(), gwIDs(old), gw, backend.proc)
	gwWaitMetric(t, gw.url, `fleetmesh_gateway_catchups_total{direction="to_backend",method="full-walk"}`, 1)
}
