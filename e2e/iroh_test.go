package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
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
