package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

func testDashboard(t *testing.T, token string) (*Dashboard, *prometheus.CounterVec, prometheus.Gauge) {
	t.Helper()
	reg := prometheus.NewRegistry()
	events := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetmesh_relay_events_total", Help: "x"}, []string{"result"})
	conns := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetmesh_relay_connections", Help: "x"})
	reg.MustRegister(events, conns)
	return New(reg, Options{Config: Config{Token: token}, Title: "test"}), events, conns
}

func get(t *testing.T, d *Dashboard, remote, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.RemoteAddr = remote
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	return rec
}

func TestPlotsRatesAndGauges(t *testing.T) {
	d, events, conns := testDashboard(t, "")
	t0 := time.Now().Add(-time.Minute)
	for i := range 5 {
		events.WithLabelValues("stored").Add(100) // 100 per 10 s: 10/s
		conns.Set(float64(3 + i))
		d.Sample(t0.Add(time.Duration(i) * 10 * time.Second))
	}
	rec := get(t, d, "127.0.0.1:5000", "/dashboard", nil)
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	// Four rates from five samples of the counter, five gauge points.
	if !strings.Contains(body, `<title>stored</title>`) || !regexp.MustCompile(`data-points="4"`).MatchString(body) {
		t.Fatalf("no 4-point rate line for stored events:\n%s", body)
	}
	if !strings.Contains(body, "stored: 10.00") && !strings.Contains(body, "stored: 10") {
		t.Fatalf("last rate is not 10/s:\n%s", body)
	}
	if !strings.Contains(body, `data-points="5"`) || !strings.Contains(body, "connections: 7") {
		t.Fatalf("no 5-point connections line ending at 7:\n%s", body)
	}
	if !strings.Contains(body, `<p class="none" title="fleetmesh_mesh_peers">No mesh peer yet: a line per kind of peer appears once this node connects to another (start it with --join CODE).</p>`) {
		t.Fatal("a panel with no metric does not say what will appear and when")
	}
	if !strings.Contains(get(t, d, "127.0.0.1:5000", "/dashboard?window=day", nil).Body.String(), "<b>day</b>") {
		t.Fatal("no day window")
	}
}

func TestCounterResetIsNoRate(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c_total", Help: "x"})
	reg.MustRegister(c)
	d := New(reg, Options{Panels: []Panel{{Title: "c", Series: []Series{{Metric: "c_total", Rate: true}}}}})
	now := time.Now()
	c.Add(50)
	d.Sample(now.Add(-20 * time.Second))
	d.Sample(now.Add(-10 * time.Second))
	ls, _, _ := lines([]point{
		{at: now.Add(-20 * time.Second), values: []lineValue{{lineKey(0, 0, ""), 50}}},
		{at: now.Add(-10 * time.Second), values: []lineValue{{lineKey(0, 0, ""), 5}}},
	}, 0, d.opts.Panels[0])
	if len(ls) != 1 || len(ls[0].Points) != 1 || ls[0].Points[0][1] != 0 {
		t.Fatalf("rate across a reset = %+v, want one point of 0", ls)
	}
}

func TestSplitIsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g", Help: "x"}, []string{"l"})
	reg.MustRegister(v)
	for i := range 3 * MaxSplits {
		v.WithLabelValues(fmt.Sprint(i)).Set(float64(i))
	}
	d := New(reg, Options{Panels: []Panel{{Title: "g", Series: []Series{{Metric: "g", By: "l"}}}}})
	d.Sample(time.Now())
	ls, _, _ := lines(d.hour.points, 0, d.opts.Panels[0])
	if len(ls) != MaxSplits {
		t.Fatalf("%d lines, want %d", len(ls), MaxSplits)
	}
}

// TestSplitByTwoLabels: a series split by class and transport draws a
// line per pair that was ever above 0 in the window, and the legend says
// the others are not drawn.
func TestSplitByTwoLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetmesh_mesh_peers", Help: "x"}, []string{"class", "transport"})
	reg.MustRegister(v)
	for _, c := range []string{"anchor", "home", "leaf", "unknown"} {
		for _, tr := range []string{"tcp", "quic", "relay"} {
			v.WithLabelValues(c, tr).Set(0)
		}
	}
	d := New(reg, Options{Panels: []Panel{{Title: "Mesh peers", Series: []Series{{Metric: "fleetmesh_mesh_peers", By: "class,transport"}}}}})
	t0 := time.Now().Add(-time.Minute)
	d.Sample(t0)
	v.WithLabelValues("home", "quic").Set(2)
	d.Sample(t0.Add(10 * time.Second))
	v.WithLabelValues("home", "quic").Set(0)
	v.WithLabelValues("anchor", "tcp").Set(1)
	d.Sample(t0.Add(20 * time.Second))
	ls, exported, zeros := lines(d.hour.points, 0, d.opts.Panels[0])
	var names []string
	for _, l := range ls {
		names = append(names, fmt.Sprintf("%s max %v", l.Name, l.Max))
	}
	if !exported || zeros == 0 || len(ls) != 2 || names[0] != "anchor/tcp max 1" || names[1] != "home/quic max 2" {
		t.Fatalf("lines %q, %d left out at 0 (exported %v); want anchor/tcp and home/quic drawn, others left out", names, zeros, exported)
	}
	body := get(t, d, "127.0.0.1:1", "/dashboard", nil).Body.String()
	if !strings.Contains(body, "lines at 0 throughout are not drawn") || !strings.Contains(body, `data-max="2"`) {
		t.Fatalf("the page does not count the lines at 0 or give a line's max:\n%s", body)
	}
}

// TestWindowKeepsOneKeyCopy: a full hour window of the default panels
// keeps each line's key once, shared by every sample, and each sample's
// values in a slice without spare room; the window's own allocations are
// then some 24 bytes a line a sample, not a map and a new key each.
func TestWindowKeepsOneKeyCopy(t *testing.T) {
	reg := prometheus.NewRegistry()
	peers := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetmesh_mesh_peers", Help: "x"}, []string{"class", "transport"})
	events := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetmesh_relay_events_total", Help: "x"}, []string{"result"})
	reg.MustRegister(peers, events)
	for _, c := range []string{"anchor", "home", "leaf"} {
		for _, tr := range []string{"tcp", "quic"} {
			peers.WithLabelValues(c, tr).Set(1)
		}
	}
	d := New(reg, Options{})
	t0 := time.Now().Add(-2 * time.Hour)
	for i := range d.hour.max + 10 {
		events.WithLabelValues("stored").Inc()
		d.Sample(t0.Add(time.Duration(i) * 10 * time.Second))
	}
	pts := d.hour.points
	if len(pts) != d.hour.max {
		t.Fatalf("hour window holds %d samples, want %d", len(pts), d.hour.max)
	}
	first, last := pts[0], pts[len(pts)-1]
	if len(first.values) == 0 || len(first.values) != len(last.values) {
		t.Fatalf("samples of %d and %d lines", len(first.values), len(last.values))
	}
	for i := range first.values {
		a, b := first.values[i].key, last.values[i].key
		if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
			t.Fatalf("line %d: the first and last samples keep separate copies of key %q", i, a)
		}
	}
	for _, p := range pts {
		if cap(p.values) != len(p.values) {
			t.Fatalf("a sample keeps room for %d lines and has %d", cap(p.values), len(p.values))
		}
	}
}

func TestAccess(t *testing.T) {
	open, _, _ := testDashboard(t, "")
	guarded, _, _ := testDashboard(t, "s3cret")
	for _, tc := range []struct {
		name   string
		d      *Dashboard
		remote string
		target string
		hdr    map[string]string
		want   int
	}{
		{"loopback v4", open, "127.0.0.1:1", "/dashboard", nil, 200},
		{"loopback v6", open, "[::1]:1", "/dashboard", nil, 200},
		{"elsewhere", open, "192.0.2.7:1", "/dashboard", nil, 403},
		{"elsewhere with a token the node has not set", open, "192.0.2.7:1", "/dashboard?token=x", nil, 403},
		{"through a proxy on loopback", open, "127.0.0.1:1", "/dashboard", map[string]string{"X-Forwarded-For": "198.51.100.1"}, 403},
		{"Forwarded header", open, "127.0.0.1:1", "/dashboard", map[string]string{"Forwarded": "for=198.51.100.1"}, 403},
		{"elsewhere, no token", guarded, "192.0.2.7:1", "/dashboard", nil, 403},
		{"elsewhere, wrong token", guarded, "192.0.2.7:1", "/dashboard?token=guess", nil, 403},
		{"elsewhere, bearer", guarded, "192.0.2.7:1", "/dashboard", map[string]string{"Authorization": "Bearer s3cret"}, 200},
		{"elsewhere, query", guarded, "192.0.2.7:1", "/dashboard?token=s3cret", nil, 200},
		{"elsewhere, cookie", guarded, "192.0.2.7:1", "/dashboard", map[string]string{"Cookie": "fleetmesh_dashboard=s3cret"}, 200},
		{"proxied, bearer", guarded, "127.0.0.1:1", "/dashboard", map[string]string{"X-Forwarded-For": "198.51.100.1", "Authorization": "Bearer s3cret"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := get(t, tc.d, tc.remote, tc.target, tc.hdr)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body.String())
			}
			if tc.want == 403 && !strings.Contains(rec.Body.String(), "[dashboard] token") {
				t.Fatalf("refusal does not say how to get in: %s", rec.Body.String())
			}
		})
	}
	if c := get(t, guarded, "192.0.2.7:1", "/dashboard?token=s3cret", nil).Result().Cookies(); len(c) != 1 || !c[0].HttpOnly {
		t.Fatalf("a token in the query does not set an HttpOnly cookie: %v", c)
	}
}

// TestStorageReadableAtSmallUse plots 18.5 MB used against a 10.7 GB
// bound: the used line takes the plot's height instead of lying flat on
// its floor, and the bound is not drawn but given in the legend with the
// share used; a bound near the use is drawn and sets the scale.
func TestStorageReadableAtSmallUse(t *testing.T) {
	cases := []struct {
		name      string
		used, max float64
		boundDraw bool
		legend    string
	}{
		{"small use", 18.5e6, 10.7e9, false, "bound: 10.7G (0.17 % used; too far above to draw)"},
		{"near the bound", 9e9, 10.7e9, true, "bound: 10.7G</span>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			used := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetmesh_store_bytes", Help: "x"})
			bound := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetmesh_store_max_bytes", Help: "x"})
			reg.MustRegister(used, bound)
			d := New(reg, Options{})
			bound.Set(tc.max)
			t0 := time.Now().Add(-time.Minute)
			for i := range 3 {
				used.Set(tc.used * float64(i+1) / 3)
				d.Sample(t0.Add(time.Duration(i) * 10 * time.Second))
			}
			body := get(t, d, "127.0.0.1:5000", "/dashboard", nil).Body.String()
			panel := body[strings.Index(body, `data-panel="Storage"`):]
			panel = panel[:strings.Index(panel, "</div>\n</div>")]
			if got := strings.Contains(panel, "<title>bound</title>"); got != tc.boundDraw {
				t.Fatalf("bound drawn = %v, want %v:\n%s", got, tc.boundDraw, panel)
			}
			if !strings.Contains(panel, tc.legend) {
				t.Fatalf("legend lacks %q:\n%s", tc.legend, panel)
			}
			// The used line's last point: at the top of the plot when the
			// bound is off the scale.
			m := regexp.MustCompile(`points="[^"]* [\d.]+,([\d.]+)"[^>]*><title>used</title>`).FindStringSubmatch(panel)
			if m == nil {
				t.Fatalf("no used line:\n%s", panel)
			}
			if top := m[1] == "0.0"; top == tc.boundDraw {
				t.Fatalf("used line ends at y=%s (bound drawn %v)", m[1], tc.boundDraw)
			}
		})
	}
}
