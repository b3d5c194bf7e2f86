package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// panelLine is one drawn line of a dashboard panel: its name and its
// largest value in the window.
type panelLine struct {
	panel, name string
	max         float64
}

// dashboardLines reads the lines the dashboard's HTML draws, by panel.
var (
	panelStart   = regexp.MustCompile(`<div class="panel" data-panel="([^"]*)">`)
	polylineLine = regexp.MustCompile(`data-points="(\d+)" data-max="([^"]*)"><title>([^<]*)</title>`)
)

func dashboardLines(body string) []panelLine {
	var out []panelLine
	starts := panelStart.FindAllStringSubmatchIndex(body, -1)
	for i, st := range starts {
		end := len(body)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		title := body[st[2]:st[3]]
		for _, m := range polylineLine.FindAllStringSubmatch(body[st[1]:end], -1) {
			if n, _ := strconv.Atoi(m[1]); n < 2 {
				continue
			}
			v, _ := strconv.ParseFloat(m[2], 64)
			out = append(out, panelLine{panel: title, name: html.UnescapeString(m[3]), max: v})
		}
	}
	return out
}

// dashboardWants are the plots TestDashboardInChromium needs data in: a
// line of the panel whose name has the prefix (any, if "") and whose
// largest value is above 0.
var dashboardWants = []struct{ panel, prefix string }{
	{"Events in", "stored"},
	{"Clients", "connections"},
	{"Storage", "used"},
	{"Mesh peers", ""},   // a class/transport pair: home/tcp, say
	{"Sync traffic", ""}, // sync or gossip, in or out
	{"Durable shards", "held"},
}

// missingPlots lists the dashboardWants that lines do not satisfy.
func missingPlots(lines []panelLine) []string {
	var missing []string
	for _, w := range dashboardWants {
		if !slices.ContainsFunc(lines, func(l panelLine) bool {
			return l.panel == w.panel && strings.HasPrefix(l.name, w.prefix) && l.max > 0
		}) {
			missing = append(missing, w.panel)
		}
	}
	return missing
}

// TestDashboardInChromium loads the operator page of a node that has a
// mesh peer and client traffic in Debian's chromium (driven by
// playwright-core): the page loads, and the plots of events, clients,
// storage, mesh peers (split by class and transport), sync traffic and
// durable shards are drawn with data, and the headline above them shows
// the node's version, class and peer count with their states in words; a
// screenshot is saved.
func TestDashboardInChromium(t *testing.T) {
	needNode(t)
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Fatal("chromium is missing (apt-get install chromium; scripts/test.sh does)")
	}
	cfg := nodeConfig(nil) + meshConfig + dashboardConfig
	n := startMeshNode(t, newHome(t, cfg))
	startMeshNode(t, newHome(t, cfg), n.mesh)
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
	// Wait until the page, as the node renders it, has data in every plot
	// the test looks for (bounded).
	for {
		resp, err := http.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing := missingPlots(dashboardLines(string(body)))
		if len(missing) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the dashboard has no data in %v:\n%s\n%s", missing, body, n.output())
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
		Status   int    `json:"status"`
		Title    string `json:"title"`
		Headline map[string]struct {
			Value string `json:"value"`
			State string `json:"state"`
			Tone  string `json:"tone"`
			Shown bool   `json:"shown"`
		} `json:"headline"`
		Panels []struct {
			Title    string `json:"title"`
			Exported bool   `json:"exported"`
			Lines    []struct {
				Name   string  `json:"name"`
				Points int     `json:"points"`
				Max    float64 `json:"max"`
				Drawn  bool    `json:"drawn"`
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
	// The headline: the node's version, class and peer count, each with
	// its state in words, as the browser shows them.
	vout, _, err := cli(t, "version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ver struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(vout), &ver); err != nil {
		t.Fatalf("version --json printed %q: %v", vout, err)
	}
	for name, f := range got.Headline {
		if !f.Shown || f.State == "" {
			t.Errorf("headline %s: %+v, want it shown with a state in words", name, f)
		}
	}
	if v := got.Headline["Version"].Value; ver.Version == "" || !strings.HasPrefix(v, ver.Version) {
		t.Errorf("headline version %q, want the build's %q", v, ver.Version)
	}
	if c := got.Headline["Class"].Value; !strings.HasPrefix(c, "home") && !strings.HasPrefix(c, "anchor") {
		t.Errorf("headline class %q, want the node's class", c)
	}
	if m := regexp.MustCompile(`^(\d+) connected`).FindStringSubmatch(got.Headline["Peers"].Value); m == nil || m[1] == "0" {
		t.Errorf("headline peers %q, want the one mesh peer counted", got.Headline["Peers"].Value)
	}
	// What the browser drew: lines with width on the page.
	var drawn []panelLine
	for _, p := range got.Panels {
		for _, l := range p.Lines {
			if l.Points >= 2 && l.Drawn {
				drawn = append(drawn, panelLine{panel: p.Title, name: l.Name, max: l.Max})
			}
		}
	}
	if missing := missingPlots(drawn); len(missing) > 0 {
		t.Fatalf("panels without a drawn line of data in chromium: %v\n%s", missing, out)
	}
	for _, l := range drawn {
		if l.panel == "Mesh peers" && !strings.Contains(l.name, "/") {
			t.Errorf("a mesh peers line %q does not name a class and a transport", l.name)
		}
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
