package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// storageUsedLine is the Storage panel's "used" line, with its last value
// in full.
var storageUsedLine = regexp.MustCompile(`(?s)data-panel="Storage">.*?data-last="([^"]*)" data-points="\d+" data-max="[^"]*"><title>used</title>`)

// TestStorageFiguresAgree reads storage used for one node three ways,
// `fleetmesh status --json`, /metrics (fleetmesh_store_bytes) and the
// dashboard's Storage panel, after it has stored events: once the store is
// quiet and the dashboard has sampled it, all three are the same number,
// and status also gives the bound the dashboard and metrics give.
func TestStorageFiguresAgree(t *testing.T) {
	n := startNode(t, newHome(t, nodeConfig(nil)+dashboardConfig+"\n[mesh]\nstorage_max_bytes = 10737418240\n"))
	c, err := dial(t.Context(), n.url)
	if err != nil {
		t.Fatal(err)
	}
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		ev, err := u.sign(1, randomContent("storage"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := publishOne(c, ev); err != nil || !ok.Accepted {
			t.Fatalf("publish: %+v %v", ok, err)
		}
	}
	c.Close()

	deadline := time.Now().Add(2 * time.Minute)
	var status, metric, dash float64
	var maxBytes int64
	for {
		out, errOut, err := cli(t, "status", "--home", n.home, "--json")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, errOut)
		}
		var st struct {
			Storage struct {
				Bytes     int64 `json:"bytes"`
				MaxBytes  int64 `json:"max_bytes"`
				FileBytes int64 `json:"file_bytes"`
			} `json:"storage"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		status, maxBytes = float64(st.Storage.Bytes), st.Storage.MaxBytes
		metric = gwMetric(t, n.url, "fleetmesh_store_bytes")
		resp, err := http.Get(n.httpURL() + "/dashboard")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		dash = -1
		if m := storageUsedLine.FindSubmatch(body); m != nil {
			dash, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		if status > 0 && status == metric && metric == dash {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("storage used: status %v, /metrics %v, dashboard %v; never the same", status, metric, dash)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("storage used %v bytes in status, /metrics and the dashboard", status)
	if bound := gwMetric(t, n.url, "fleetmesh_store_max_bytes"); maxBytes != 10737418240 || bound != float64(maxBytes) {
		t.Fatalf("bound: status %d, /metrics %v, want 10737418240", maxBytes, bound)
	}
}
