package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/store"
)

// TestOperatorHooks: NIP-86 calls reach Manage, RefuseClient refuses
// upgrades, SetInfo changes NIP-11, and RejectEvent policies learn each
// event's origin.
func TestOperatorHooks(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := DefaultConfig()
	cfg.EventsPerSecond, cfg.IPEventsPerSecond = 0, 0
	r := New(cfg, st, nil, nil)
	managed := 0
	r.Manage = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { managed++; w.Write([]byte(`{"result":true}`)) })
	var refuse atomic.Bool
	r.RefuseClient = func(client string) string {
		if refuse.Load() && strings.HasPrefix(client, "127.0.0.1:") {
			return "blocked: test"
		}
		return ""
	}
	var origins []Origin
	r.RejectEvent = append(r.RejectEvent, func(ctx context.Context, ev *nostr.Event) string {
		origins = append(origins, OriginOf(ctx))
		return ""
	})
	srv := startServer(r, nil, false)
	defer srv.Close()
	defer r.Shutdown(context.Background())

	for _, tc := range []struct {
		method, ctype string
		managed       bool
	}{
		{"POST", "application/nostr+json+rpc", true},
		{"POST", "application/nostr+json+rpc; charset=utf-8", true},
		{"POST", "application/json", false},
		{"GET", "application/nostr+json+rpc", false},
	} {
		before := managed
		req, _ := http.NewRequest(tc.method, srv.URL, strings.NewReader("{}"))
		req.Header.Set("Content-Type", tc.ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := managed > before; got != tc.managed {
			t.Errorf("%s %s reached Manage: %v, want %v", tc.method, tc.ctype, got, tc.managed)
		}
	}

	r.SetInfo(Info{Name: "renamed", Icon: "https://x.example/i.png"})
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Name, Description, Icon string
		NIPs                    []int `json:"supported_nips"`
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if doc.Name != "renamed" || doc.Icon != "https://x.example/i.png" || doc.Description != cfg.Description {
		t.Errorf("NIP-11 after SetInfo: %+v", doc)
	}
	if !slices.Contains(doc.NIPs, 86) {
		t.Errorf("supported_nips %v lacks 86 with Manage set", doc.NIPs)
	}

	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.ReadMessage(); err != nil { // the AUTH challenge: the connection is served
		t.Fatal(err)
	}
	if n := r.CloseClients(func(c string) bool { return strings.HasPrefix(c, "127.0.0.1:") }); n != 1 {
		t.Errorf("CloseClients closed %d, want 1", n)
	}
	ws.Close()
	refuse.Store(true)
	_, resp, err = websocket.DefaultDialer.Dial(url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("blocked client's upgrade: err %v, resp %v", err, resp)
	}
	refuse.Store(false)

	k, _ := nostr.GenerateSecretKey()
	ev := &nostr.Event{Kind: 1, CreatedAt: 1_700_000_000, Content: "x"}
	k.Sign(ev)
	if _, err := r.AddEvent(context.Background(), ev, FromMesh); err != nil {
		t.Fatal(err)
	}
	if len(origins) != 1 || origins[0] != FromMesh {
		t.Fatalf("policy saw origins %v, want [FromMesh]", origins)
	}
}
