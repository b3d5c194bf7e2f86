package mediator

import (
	"encoding/json"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPushRegister: only a leaf with a grant registers, only an http(s)
// URL is taken, and a queued forward wakes the endpoint with a body that
// names the wake type and nothing else, at most once per interval.
func TestPushRegister(t *testing.T) {
	got := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("Content-Type") + " " + string(b)
	}))
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.PushInterval = 2 * time.Second
	m, err := Open(t.TempDir(), "did:key:mediator", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const leaf = "did:key:leaf1"
	if _, err := m.Handle(authed(leaf, mediation.TypePushRegister, mediation.PushRegisterBody{Endpoint: srv.URL})); code(err) != "e.p.trust.unauthorized" {
		t.Fatalf("register without a grant: %v", err)
	}
	if _, err := m.Handle(authed(leaf, mediation.TypeMediateRequest, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Handle(authed(leaf, mediation.TypeRecipientUpdate, mediation.RecipientUpdateBody{Updates: []mediation.Update{{RecipientDID: leaf, Action: "add"}}})); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"ftp://x/y", "not a url", "http://", "https://" + strings.Repeat("a", MaxPushEndpointBytes)} {
		if _, err := m.Handle(authed(leaf, mediation.TypePushRegister, mediation.PushRegisterBody{Endpoint: bad})); code(err) != "e.p.msg.malformed" {
			t.Fatalf("endpoint %.40q: %v, want e.p.msg.malformed", bad, err)
		}
	}
	r, err := m.Handle(authed(leaf, mediation.TypePushRegister, mediation.PushRegisterBody{Endpoint: srv.URL + "/up"}))
	if err != nil || r.Type != mediation.TypePushRegistered {
		t.Fatalf("register: %v %+v", err, r)
	}
	for i := 0; i < 3; i++ {
		if _, err := m.Handle(forward(t, leaf, 10)); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := json.Marshal(mediation.PushWakeBody{Type: mediation.TypePushWake})
	for i := 0; i < 2; i++ { // one at once, one when the interval ends
		select {
		case b := <-got:
			if b != "application/json "+string(want) {
				t.Fatalf("wake %d: %q, want only %s", i, b, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("wake %d did not come", i)
		}
	}
	select {
	case b := <-got:
		t.Fatalf("three forwards within an interval woke the leaf a third time: %q", b)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := m.Handle(authed(leaf, mediation.TypePushRegister, mediation.PushRegisterBody{Endpoint: ""})); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Handle(forward(t, leaf, 10)); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		t.Fatalf("woken after unregistering: %q", b)
	case <-time.After(500 * time.Millisecond):
	}
}
