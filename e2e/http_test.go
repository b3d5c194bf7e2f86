package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const httpTimeout = 10 * time.Second

func get(t *testing.T, url, accept string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

// TestHTTPEndpoints checks the NIP-11 document, /healthz and /metrics on
// the relay's port.
func TestHTTPEndpoints(t *testing.T) {
	needBinary(t)
	home := newHome(t, nodeConfig(map[string]string{
		"name":              `"e2e relay"`,
		"description":       `"a node under test"`,
		"max_message_bytes": "50000",
		"max_subscriptions": "33",
		"max_limit":         "77",
	}))
	n := startNode(t, home)
	self := runID(t, home)

	res, body := get(t, n.httpURL()+"/", "application/nostr+json")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("NIP-11: status %d: %s", res.StatusCode, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.Contains(ct, "application/nostr+json") {
		t.Errorf("NIP-11 Content-Type %q, want application/nostr+json", ct)
	}
	if res.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Error("NIP-11 has no Access-Control-Allow-Origin header (NIP-11 requires CORS)")
	}
	var info struct {
		Name          string         `json:"name"`
		Description   string         `json:"description"`
		Software      string         `json:"software"`
		Version       string         `json:"version"`
		SupportedNIPs []int          `json:"supported_nips"`
		Limitation    map[string]any `json:"limitation"`
		Fleetmesh     idOutput       `json:"fleetmesh"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		t.Fatalf("NIP-11 body is not JSON: %v\n%s", err, body)
	}
	if info.Name != "e2e relay" || info.Description != "a node under test" {
		t.Errorf("NIP-11 name %q, description %q: not the configured ones", info.Name, info.Description)
	}
	if info.Fleetmesh.DID != self.DID || info.Fleetmesh.PeerID != self.PeerID || info.Fleetmesh.Class != self.Class {
		t.Errorf("NIP-11 fleetmesh object %+v does not name this node %+v", info.Fleetmesh, self)
	}
	out, _, err := cli(t, "version", "--json")
	var build struct {
		Version string `json:"version"`
	}
	if err != nil || json.Unmarshal([]byte(out), &build) != nil || build.Version == "" {
		t.Fatalf("fleetmesh version --json: %v %q", err, out)
	}
	if info.Software != "fleetmesh" || info.Version != build.Version {
		t.Errorf("NIP-11 software %q version %q; want fleetmesh and the build's version %q", info.Software, info.Version, build.Version)
	}
	have := map[int]bool{}
	for _, nip := range info.SupportedNIPs {
		have[nip] = true
	}
	for _, nip := range []int{1, 9, 11, 40, 42, 45, 70} {
		if !have[nip] {
			t.Errorf("supported_nips %v lacks %d", info.SupportedNIPs, nip)
		}
	}
	for key, want := range map[string]float64{"max_message_length": 50000, "max_subscriptions": 33, "max_limit": 77} {
		if got, ok := info.Limitation[key]; !ok || got != want {
			t.Errorf("limitation.%s = %v, want the configured %v", key, got, want)
		}
	}

	if res, body := get(t, n.httpURL()+"/healthz", ""); res.StatusCode != http.StatusOK {
		t.Errorf("/healthz: status %d: %s", res.StatusCode, body)
	}
	res, body = get(t, n.httpURL()+"/metrics", "")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: status %d", res.StatusCode)
	}
	if !strings.Contains(body, "# TYPE ") || !strings.Contains(body, "# HELP ") {
		t.Errorf("/metrics is not Prometheus text format:\n%s", tail(body, 2000))
	}
	if !strings.Contains(res.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("/metrics Content-Type %q", res.Header.Get("Content-Type"))
	}
}

// TestNIP11CORSHeaders checks the three CORS headers NIP-11 requires, so
// browser clients can read the document.
func TestNIP11CORSHeaders(t *testing.T) {
	needBinary(t)
	n := startNode(t, newHome(t, nodeConfig(nil)))
	res, body := get(t, n.httpURL()+"/", "application/nostr+json")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("NIP-11: status %d: %s", res.StatusCode, body)
	}
	for _, h := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Headers", "Access-Control-Allow-Methods"} {
		if res.Header.Get(h) == "" {
			t.Errorf("NIP-11 response lacks %s", h)
		}
	}
}
