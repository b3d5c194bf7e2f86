package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// dashboardConfig samples twice a second so that a test sees plots after a
// few seconds of traffic.
const dashboardConfig = `
[dashboard]
sample_interval = "500ms"
`

// artifactDir is where tests leave files for a person to look at
// (screenshots): $FLEETMESH_ARTIFACTS, else a folder in the temp dir.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FLEETMESH_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "fleetmesh-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardInChromium loads the operator page of a node with traffic in
// Debian's chromium (driven by playwright-core): the page loads, the plots
// of events and clients have data, and a screenshot is saved.
func TestDashboardInChromium(t *testing.T) {
	needNode(t)
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Fatal("chromium is missing (apt-get install chromium; scripts/test.sh does)")
	}
	n := startNode(t, newHome(t, dashboardConfig))
	page := n.httpURL() + "/dashboard"

	// Traffic: a few connections publishing for a few samples' time.
	// Bounds the whole test; chromium starts slowly on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var conns []*websocket.Conn
	for range 3 {
		c, err := dial(ctx, n.url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		ev, err := u.sign(1, randomContent("dash"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := publishOne(conns[i%len(conns)], ev); err != nil || !ok.Accepted {
			t.Fatalf("publish: %+v %v", ok, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Wait until the page has sampled the traffic's end (bounded).
	samples := regexp.MustCompile(`(\d+) samples`)
	for {
		resp, err := http.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := samples.FindSubmatch(body); m != nil {
			if k, _ := strconv.Atoi(string(m[1])); k >= 8 {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the dashboard took no samples:\n%s", body)
		}
		time.Sleep(250 * time.Millisecond)
	}

	shot := filepath.Join(artifactDir(t), "dashboard.png")
	cmd := exec.CommandContext(ctx, "node", filepath.Join(moduleRoot, "interop", "dashboard", "shot.mjs"), page, shot)
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("shot.mjs: %v\n%s\n%s", err, out, stderr)
	}
	var got struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
		Panels []struct {
			Title    string `json:"title"`
			Exported bool   `json:"exported"`
			Lines    []struct {
				Name   string `json:"name"`
				Points int    `json:"points"`
				Drawn  bool   `json:"drawn"`
			} `json:"lines"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("shot.mjs printed %q: %v", out, err)
	}
	t.Logf("dashboard screenshot: %s", shot)
	if got.Status != http.StatusOK || got.Title != "fleetmesh node" {
		t.Fatalf("page: status %d title %q", got.Status, got.Title)
	}
	want := map[string]string{"Events in": "stored", "Clients": "connections", "Storage": "used"}
	for _, p := range got.Panels {
		name, ok := want[p.Title]
		if !ok {
			continue
		}
		for _, l := range p.Lines {
			if l.Name == name && l.Points >= 2 && l.Drawn {
				delete(want, p.Title)
			}
		}
	}
	if len(want) > 0 {
		t.Fatalf("panels without a drawn line of data: %v\n%s", want, out)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
}

// TestDashboardNotServedElsewhere: a node listening on every address serves
// its dashboard to loopback, refuses it to a client on another host (a
// network namespace) without the token, and serves it to that client with
// the token. The relay itself stays reachable from there.
func TestDashboardNotServedElsewhere(t *testing.T) {
	needBinary(t)
	lab := newNetLab(t)
	srv, cli := lab.addNS("dsrv"), lab.addNS("dcli")
	lab.veth(srv, "eth0", cli, "eth0")
	const srvIP, cliIP = "192.0.0.193", "192.0.0.194"
	lab.addr(srv, "eth0", srvIP+"/30")
	lab.addr(cli, "eth0", cliIP+"/30")

	const token = "let-me-in-7f3a"
	home := newHome(t, dashboardConfig+fmt.Sprintf("token = %q\n", token))
	if _, err := startNodeCmd(t, home, exec.Command("ip", "netns", "exec", srv, binary, "run", "--home", home, "--listen", "0.0.0.0:7447")); err != nil {
		t.Fatal(err)
	}
	get := func(ns, url string, hdr map[string]string) (int, string) {
		t.Helper()
		client := lab.httpClient(ns)
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s from %s: %v", url, ns, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(srv, "http://127.0.0.1:7447/dashboard", nil); code != http.StatusOK {
		t.Fatalf("loopback: %d %s", code, body)
	}
	remote := "http://" + srvIP + ":7447"
	if code, body := get(cli, remote+"/dashboard", nil); code != http.StatusForbidden || !strings.Contains(body, "[dashboard] token") {
		t.Fatalf("from another host without the token: %d %s", code, body)
	}
	if code, _ := get(cli, remote+"/dashboard?token=wrong", nil); code != http.StatusForbidden {
		t.Fatalf("from another host with a wrong token: %d", code)
	}
	if code, body := get(cli, remote+"/dashboard", map[string]string{"Authorization": "Bearer " + token}); code != http.StatusOK {
		t.Fatalf("from another host with the token: %d %s", code, body)
	}
	if code, _ := get(cli, remote+"/", map[string]string{"Accept": "application/nostr+json"}); code != http.StatusOK {
		t.Fatalf("the relay's NIP-11 from another host: %d", code)
	}
}
