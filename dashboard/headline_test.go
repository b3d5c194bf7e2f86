package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestHeadlineWords checks the state each fact is given: normal things
// say so, wrong things say what to do.
func TestHeadlineWords(t *testing.T) {
	base := Headline{Version: "v1.2.3", Uptime: time.Hour, Class: "home", ClassConfig: "auto", Reachability: "private",
		Iroh: "up", Peers: 2, PeerKinds: []PeerKind{{"home", "tcp", 1}, {"anchor", "quic", 1}}, StorageBytes: 18_500_000, StorageMaxBytes: 10_700_000_000}
	cases := []struct {
		name       string
		change     func(*Headline)
		fact, tone string
		words      string
	}{
		{"home behind NAT", func(*Headline) {}, "Reachability", "ok", "normal behind NAT"},
		{"anchor behind NAT", func(h *Headline) { h.Class = "anchor" }, "Reachability", "bad", "wrong for an anchor"},
		{"peers by kind", func(*Headline) {}, "Peers", "ok", "2 connected (1 home over tcp, 1 anchor over quic)"},
		{"alone after a while", func(h *Headline) { h.Peers, h.PeerKinds = 0, nil }, "Peers", "warn", "run --join CODE"},
		{"alone at start", func(h *Headline) { h.Peers, h.PeerKinds, h.Uptime = 0, nil, 5*time.Second }, "Peers", "info", "looking for peers"},
		{"small use", func(*Headline) {}, "Storage", "ok", "18.5MB used of 10.7GB (0.2 %)"},
		{"nearly full", func(h *Headline) { h.StorageBytes = 10_600_000_000 }, "Storage", "bad", "raise storage_max_bytes"},
		{"iroh off", func(h *Headline) { h.Iroh, h.IrohWhy = "off", "[iroh] enabled = false" }, "Iroh", "info", "off: [iroh] enabled = false"},
		{"no errors", func(*Headline) {}, "Last errors", "ok", "none"},
		{"errors counted", func(h *Headline) {
			h.Errors = []Error{{Time: time.Now(), Level: "WARN", Message: "mesh: dial failed", Count: 7}}
		}, "Last errors", "warn", "mesh: dial failed (×7)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base
			tc.change(&h)
			for _, f := range h.facts() {
				if f.Name != tc.fact {
					continue
				}
				if f.Tone != tc.tone || !strings.Contains(f.Value+" "+f.State, tc.words) {
					t.Fatalf("%s: %q / %q (%s), want tone %s saying %q", f.Name, f.Value, f.State, f.Tone, tc.tone, tc.words)
				}
				return
			}
			t.Fatalf("no %s fact", tc.fact)
		})
	}
}

// TestHeadlineOnPage: the page shows the headline above the plots, and
// every default panel has operator words for when it is empty.
func TestHeadlineOnPage(t *testing.T) {
	d := New(prometheus.NewRegistry(), Options{Headline: func() Headline {
		return Headline{Version: "v9.9.9", Class: "home", Peers: 3, Uptime: time.Minute}
	}})
	body := get(t, d, "127.0.0.1:5000", "/dashboard", nil).Body.String()
	for _, want := range []string{`<tr data-fact="Version" class="info"><th>Version</th><td class="value">v9.9.9</td>`, `<td class="value">3 connected</td>`} {
		if !strings.Contains(body, want) {
			t.Fatalf("page lacks %q:\n%s", want, body)
		}
	}
	if strings.Index(body, `class="headline"`) > strings.Index(body, `class="grid"`) {
		t.Fatal("the headline is not above the plots")
	}
	for _, p := range DefaultPanels() {
		if p.Empty == "" {
			t.Errorf("panel %q has no words for when it is empty", p.Title)
		}
	}
}
