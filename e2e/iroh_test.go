package e2e

import (
	"context"
	encbin "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIrohRunLine: with the helper installed, `fleetmesh run` prints one
// `iroh ENDPOINT_ID ADDR...` line, with the EndpointId `fleetmesh id`
// prints, /metrics says iroh is up, and so does `fleetmesh status`.
func TestIrohRunLine(t *testing.T) {
	needNode(t)
	helper := filepath.Join(moduleRoot, "iroh", "helper")
	home := newHome(t, fmt.Sprintf("[iroh]\nhelper_dir = %q\nbind = [\"127.0.0.1:0\"]\n", helper))
	idOut, _, err := cli(t, "id", "--home", home)
	if err != nil {
		t.Fatal(err)
	}
	var id struct {
		EndpointID string `json:"endpoint_id"`
	}
	json.Unmarshal([]byte(idOut), &id)
	want := id.EndpointID
	if want == "" {
		t.Fatalf("fleetmesh id printed no endpoint_id:\n%s", idOut)
	}
	n := startNode(t, home)
	var line string
	deadline := time.Now().Add(startTimeout)
	for line == "" && time.Now().Before(deadline) {
		for _, l := range strings.Split(n.stdout.String(), "\n") {
			if strings.HasPrefix(l, "iroh ") {
				line = l
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := strings.Fields(line)
	if len(f) < 3 || f[1] != want || !strings.HasPrefix(f[2], "127.0.0.1:") {
		t.Fatalf("iroh line %q, want `iroh %s 127.0.0.1:PORT`\n%s", line, want, n.output())
	}
	if c := strings.Count(n.stdout.String(), "\niroh "); c != 1 {
		t.Fatalf("%d iroh lines\n%s", c, n.output())
	}
	resp, err := http.Get(n.httpURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "fleetmesh_iroh_up 1") {
		t.Fatalf("/metrics has no fleetmesh_iroh_up 1:\n%s", body)
	}
	st := irohStatus(t, home)
	if st.State != "up" || st.EndpointID != want || len(st.Addrs) == 0 || st.Addrs[0] != f[2] || st.Connections == nil {
		t.Fatalf("fleetmesh status --json: iroh %+v, want up at %s", st, f[2])
	}
	out, _, err := cli(t, "status", "--home", home)
	if err != nil || !strings.Contains(out, "iroh          up: "+want+" at "+f[2]) {
		t.Fatalf("fleetmesh status has no iroh line for %s at %s (%v):\n%s", want, f[2], err, out)
	}
}

// irohState is the iroh part of `fleetmesh status --json`.
type irohState struct {
	State       string         `json:"state"`
	Why         string         `json:"why"`
	EndpointID  string         `json:"endpoint_id"`
	Addrs       []string       `json:"addrs"`
	RelayURL    string         `json:"relay_url"`
	Connections map[string]int `json:"connections"`
}

func irohStatus(t *testing.T, home string) irohState {
	t.Helper()
	out, errOut, err := cli(t, "status", "--home", home, "--json")
	if err != nil {
		t.Fatalf("fleetmesh status --json: %v\n%s", err, errOut)
	}
	var st struct {
		Iroh irohState `json:"iroh"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("fleetmesh status --json printed %q: %v", out, err)
	}
	return st.Iroh
}

// TestIrohOffWithoutHelper: a node whose iroh helper is not installed
// starts on libp2p and says why iroh is off.
func TestIrohOffWithoutHelper(t *testing.T) {
	needBinary(t)
	home := newHome(t, fmt.Sprintf("[iroh]\nhelper_dir = %q\n", filepath.Join(t.TempDir(), "nowhere")))
	n := startNode(t, home)
	if strings.Contains(n.stdout.String(), "\niroh ") {
		t.Fatalf("an iroh line without a helper:\n%s", n.output())
	}
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(n.stderr.String(), "iroh off") {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not say iroh is off:\n%s", n.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(n.stderr.String(), "no helper.mjs") {
		t.Fatalf("the log does not say why iroh is off:\n%s", n.output())
	}
	if st := irohStatus(t, home); st.State != "off" || !strings.Contains(st.Why, "no helper.mjs") {
		t.Fatalf("fleetmesh status --json: iroh %+v, want off because there is no helper.mjs", st)
	}
}

// TestIrohBindingMissing: a node whose helper directory has helper.mjs
// and @number0/iroh but not the platform's native binding starts, logs
// the cause once, exports fleetmesh_iroh_up 0, says why in `fleetmesh
// status` and on its dashboard, and starts no helper at all (so it cannot
// restart one in a loop): Check loads the binding before the helper runs.
func TestIrohBindingMissing(t *testing.T) {
	needNode(t)
	src := filepath.Join(moduleRoot, "iroh", "helper")
	helper := filepath.Join(t.TempDir(), "iroh", "helper")
	for _, f := range []string{"helper.mjs", "package.json", "package-lock.json"} {
		copyFile(t, filepath.Join(src, f), filepath.Join(helper, f))
	}
	copyDir(t, filepath.Join(src, "node_modules", "@number0", "iroh"), filepath.Join(helper, "node_modules", "@number0", "iroh"))
	const cause = "the native binding of @number0/iroh does not load on linux-x64: Cannot find module '@number0/iroh-linux-x64-gnu'"
	home := newHome(t, fmt.Sprintf("[iroh]\nhelper_dir = %q\nbind = [\"127.0.0.1:0\"]\n", helper)+dashboardConfig)
	n := startNode(t, home)
	if strings.Contains(n.stdout.String(), "\niroh ") {
		t.Fatalf("an iroh line without a binding:\n%s", n.output())
	}
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(n.stderr.String(), cause) {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not name the missing binding:\n%s", n.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := irohStatus(t, home); st.State != "off" || !strings.Contains(st.Why, cause) {
		t.Fatalf("fleetmesh status --json: iroh %+v, want off naming the missing binding", st)
	}
	out, _, err := cli(t, "status", "--home", home)
	if err != nil || !strings.Contains(out, "iroh          off: ") || !strings.Contains(out, cause) {
		t.Fatalf("fleetmesh status has no iroh off line naming the binding (%v):\n%s", err, out)
	}
	body := httpGet(t, n.httpURL()+"/metrics")
	if !strings.Contains(body, "\nfleetmesh_iroh_up 0\n") || strings.Contains(body, "fleetmesh_iroh_helper_restarts_total") {
		t.Fatalf("/metrics: want fleetmesh_iroh_up 0 and no helper restarts:\n%s", body)
	}
	// The dashboard draws the up line at 0; by its third sample the node
	// has run for a while, and the log still names the cause once and no
	// helper process runs.
	deadline = time.Now().Add(startTimeout)
	for {
		page := httpGet(t, n.httpURL()+"/dashboard")
		_, panel, ok := strings.Cut(page, `data-panel="iroh"`)
		panel, _, _ = strings.Cut(panel, "data-panel=")
		if ok && strings.Contains(panel, "up (1 = serving): 0") && strings.Contains(panel, `data-points="3"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard has no iroh panel with three samples of up at 0:\n%s", page)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := strings.Count(n.stderr.String(), cause); c != 1 {
		t.Fatalf("the cause is logged %d times, want once:\n%s", c, n.output())
	}
	if kids := helperChildren(t, n.cmd.Process.Pid); len(kids) != 0 {
		t.Fatalf("helper processes running: %v", kids)
	}
}

// helperChildren lists the child processes of pid that run helper.mjs.
func helperChildren(t *testing.T, pid int) []string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, p := range procs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// The fields after the command name, which is in parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat)[i+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if strings.Contains(string(cmdline), "helper.mjs") {
			out = append(out, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// httpGet is the body of a GET of url, which must answer 200.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return string(body)
}

// copyFile copies the file src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the regular files under src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		copyFile(t, p, filepath.Join(dst, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIrohFromReleaseArchive: the release archive of linux/amd64
// (scripts/release-archive.sh, which scripts/release.sh runs, around the
// binary under test) unpacked in a temporary directory, with no source
// tree beside it and no [iroh] helper_dir, runs iroh with no further
// step: the node prints its `iroh` line, and an unmodified @number0/iroh
// endpoint dials it over /fleetmesh/sync/1.0.0 and gets an event back.
func TestIrohFromReleaseArchive(t *testing.T) {
	needNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	archive := filepath.Join(t.TempDir(), "fleetmesh-test-linux-amd64.tar.gz")
	mk := exec.CommandContext(ctx, "bash", filepath.Join(moduleRoot, "scripts", "release-archive.sh"), binary, "linux/amd64", archive)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("release-archive.sh: %v\n%s", err, out)
	}
	unpacked := t.TempDir()
	if out, err := exec.CommandContext(ctx, "tar", "-xzf", archive, "-C", unpacked).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	dir := filepath.Join(unpacked, "fleetmesh-test-linux-amd64")
	var files []string
	filepath.WalkDir(unpacked, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "node_modules") {
			rel, _ := filepath.Rel(unpacked, p)
			files = append(files, rel)
		}
		return nil
	})
	slices.Sort(files)
	want := []string{
		"fleetmesh-test-linux-amd64/fleetmesh",
		"fleetmesh-test-linux-amd64/iroh/helper/helper.mjs",
		"fleetmesh-test-linux-amd64/iroh/helper/package-lock.json",
		"fleetmesh-test-linux-amd64/iroh/helper/package.json",
	}
	if !slices.Equal(files, want) {
		t.Fatalf("the archive holds %v (node_modules aside), want %v", files, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "iroh", "helper", "node_modules", "@number0", "iroh-linux-x64-gnu", "iroh.linux-x64-gnu.node")); err != nil {
		t.Fatalf("the archive has no linux-x64 binding: %v", err)
	}

	home := newHome(t, "[iroh]\nbind = [\"127.0.0.1:0\"]\n")
	cmd := exec.Command(filepath.Join(dir, "fleetmesh"), "run", "--home", home, "--listen", "127.0.0.1:0")
	cmd.Dir = t.TempDir() // nothing of the source tree in reach
	n, err := startNodeCmd(t, home, cmd)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	deadline := time.Now().Add(startTimeout)
	for line == "" {
		for _, l := range strings.Split(n.stdout.String(), "\n") {
			if strings.HasPrefix(l, "iroh ") {
				line = l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no iroh line from the unpacked archive's node\n%s", n.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := strings.Fields(line)
	if len(f) < 3 || !strings.HasPrefix(f[2], "127.0.0.1:") {
		t.Fatalf("iroh line %q, want `iroh ENDPOINT_ID 127.0.0.1:PORT`", line)
	}

	c, err := dial(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := u.sign(1, randomContent("archive"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := publishOne(c, ev); err != nil || !ok.Accepted {
		t.Fatalf("publish: %+v %v", ok, err)
	}
	// The sync protocol's lookup: one varint-framed REQ by id; the node
	// answers EVENT and EOSE frames and finishes the stream.
	req, _ := json.Marshal([]any{"REQ", "lookup", map[string]any{"ids": []string{ev.ID}}})
	frame := encbin.AppendUvarint(nil, uint64(len(req)))
	frame = append(frame, req...)
	peer := exec.CommandContext(ctx, "node", filepath.Join(moduleRoot, "iroh", "helper", "interop", "peer.mjs"),
		"dial", f[1], f[2], "/fleetmesh/sync/1.0.0", hex.EncodeToString(frame))
	peer.Env = append(os.Environ(), "FLEETMESH_PEER_HEX=1")
	peer.Stderr = os.Stderr
	out, err := peer.Output()
	if err != nil {
		t.Fatalf("js peer: %v: %s\n%s", err, out, n.output())
	}
	var res struct{ Remote, Got string }
	if err := json.Unmarshal(out, &res); err != nil || res.Remote != f[1] {
		t.Fatalf("js peer printed %q (%v), want a connection to %s", out, err, f[1])
	}
	raw, _ := hex.DecodeString(res.Got)
	var types []string
	for len(raw) > 0 {
		size, w := encbin.Uvarint(raw)
		if w <= 0 || uint64(len(raw)-w) < size {
			t.Fatalf("bad frame in %x", raw)
		}
		var msg []json.RawMessage
		if err := json.Unmarshal(raw[w:w+int(size)], &msg); err != nil || len(msg) == 0 {
			t.Fatalf("frame %q: %v", raw[w:w+int(size)], err)
		}
		var typ string
		json.Unmarshal(msg[0], &typ)
		types = append(types, typ)
		if typ == "EVENT" && !strings.Contains(string(msg[2]), ev.ID) {
			t.Fatalf("EVENT %s, want %s", msg[2], ev.ID)
		}
		raw = raw[w+int(size):]
	}
	if strings.Join(types, ",") != "EVENT,EOSE" {
		t.Fatalf("the node answered %v, want EVENT then EOSE", types)
	}
}
