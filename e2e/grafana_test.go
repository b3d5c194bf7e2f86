package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// metricName finds the metric names a PromQL expression uses.
var metricName = regexp.MustCompile(`\b(fleetmesh_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+)\b`)

// TestGrafanaDashboardMetrics holds deploy/grafana/fleetmesh-node.json to
// the node: a lone node already exports fleetmesh_mesh_peers, and after
// ordinary traffic (a second node, a stored event, an event refused for a
// bad signature, one the boundary keeps out of the mesh, a REQ) every
// metric a panel queries is in the node's /metrics, so the dashboard has
// no panel that can never show data.
func TestGrafanaDashboardMetrics(t *testing.T) {
	needBinary(t)
	data, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", "grafana", "fleetmesh-node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deploy/grafana/fleetmesh-node.json: %v", err)
	}
	want := map[string]string{} // metric -> panel
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %q names no metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				// A histogram's series are its name plus _bucket, _sum, _count.
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(n, suf); ok && strings.HasSuffix(base, "_seconds") {
						n = base
					}
				}
				want[n] = p.Title
			}
		}
	}

	cfg := nodeConfig(nil) + meshConfig
	a := startMeshNode(t, newHome(t, cfg))
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		fams, err := metrics(ctx, a.node)
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	if _, ok := scrape()["fleetmesh_mesh_peers"]; !ok {
		t.Error("a node with no peers exports no fleetmesh_mesh_peers")
	}

	startMeshNode(t, newHome(t, cfg), a.mesh)
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	publishAt(t, a, u, randomContent("for the dashboard"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := dial(ctx, a.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bad, err := u.sign(1, randomContent("badly signed"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad.Sig = strings.Repeat("0", 128)
	if ok, err := publishOne(c, bad); err != nil || ok.Accepted {
		t.Fatalf("a badly signed event: %+v %v, want a refusal", ok, err)
	}
	secret, err := u.sign(1, "my key is "+nsecLike(t.Name()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := publishOne(c, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := storedEvents(c, "dash", map[string]any{"authors": []string{u.pubHex}}); err != nil {
		t.Fatal(err)
	}

	var missing []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		fams := scrape()
		missing = missing[:0]
		for n, panel := range want {
			if _, ok := fams[n]; !ok {
				missing = append(missing, n+" (panel "+panel+")")
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("the Grafana dashboard queries metrics the node does not export:\n  %s", strings.Join(missing, "\n  "))
	}
	t.Logf("%d panels, %d metrics, all exported", len(dash.Panels), len(want))
}
