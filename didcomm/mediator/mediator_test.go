package mediator

import (
	"encoding/json"
	"errors"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/routing"
)

func authed(from, typ string, body any) *didcomm.Unpacked {
	m, _ := didcomm.NewMessage(typ, body)
	m.From = from
	return &didcomm.Unpacked{Message: m, Authenticated: true, Encrypted: true}
}

func code(err error) string {
	var p *didcomm.Problem
	if errors.As(err, &p) {
		return p.Code
	}
	return ""
}

func forward(t *testing.T, next string, size int) *didcomm.Unpacked {
	t.Helper()
	payload, _ := json.Marshal(map[string]string{"ciphertext": pad(size)})
	m, err := routing.Wrap(payload, next, "did:key:mediator")
	if err != nil {
		t.Fatal(err)
	}
	return &didcomm.Unpacked{Message: m, Encrypted: true}
}

func pad(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}

func TestBounds(t *testing.T) {
	cfg := Config{MaxLeaves: 2, MaxRecipientsPerLeaf: 2, MaxQueuedPerRecipient: 3, MaxQueuedBytesPerRecipient: 1 << 20, MaxDeliveryBatch: 2, MaxForwardedBytes: 1000, MaxDeliveryBytes: 1 << 20}
	m, err := Open(t.TempDir(), "did:key:mediator", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	for i, leaf := range []string{"did:key:leaf1", "did:key:leaf2", "did:key:leaf3"} {
		r, err := m.Handle(authed(leaf, mediation.TypeMediateRequest, nil))
		if err != nil {
			t.Fatal(err)
		}
		want := mediation.TypeMediateGrant
		if i == 2 {
			want = mediation.TypeMediateDeny
		}
		if r.Type != want {
			t.Fatalf("%s got %s, want %s", leaf, r.Type, want)
		}
	}
	update := func(leaf, did, action string) string {
		t.Helper()
		r, err := m.Handle(authed(leaf, mediation.TypeRecipientUpdate, mediation.RecipientUpdateBody{Updates: []mediation.Update{{RecipientDID: did, Action: action}}}))
		if err != nil {
			t.Fatal(err)
		}
		var b mediation.RecipientUpdateResponseBody
		_ = json.Unmarshal(r.Body, &b)
		return b.Updated[0].Result
	}
	for _, tc := range []struct{ leaf, did, action, want string }{
		{"did:key:leaf1", "did:key:a", "add", resultSuccess},
		{"did:key:leaf1", "did:key:a", "add", resultNoChange},
		{"did:key:leaf2", "did:key:a", "add", resultClientError}, // leaf1's
		{"did:key:leaf1", "did:key:b", "add", resultSuccess},
		{"did:key:leaf1", "did:key:c", "add", resultClientError}, // over the bound
		{"did:key:leaf1", "did:key:b", "remove", resultSuccess},
		{"did:key:leaf2", "did:key:a", "remove", resultNoChange},
		{"did:key:leaf1", "did:key:x", "shout", resultClientError},
	} {
		if got := update(tc.leaf, tc.did, tc.action); got != tc.want {
			t.Fatalf("%s %s %s: %s, want %s", tc.leaf, tc.action, tc.did, got, tc.want)
		}
	}
	if _, err := m.Handle(authed("did:key:leaf3", mediation.TypeStatusRequest, nil)); code(err) != didcomm.CodeUnauthorized {
		t.Fatalf("denied leaf got status: %v", err)
	}
	if _, err := m.Handle(authed("did:key:leaf2", mediation.TypeStatusRequest, map[string]string{"recipient_did": "did:key:a"})); code(err) != didcomm.CodeUnauthorized {
		t.Fatalf("leaf2 read leaf1's queue: %v", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := m.Handle(forward(t, "did:key:a#key-1", 10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Handle(forward(t, "did:key:a", 10)); code(err) != didcomm.CodeQueueFull {
		t.Fatalf("fourth message: %v", err)
	}
	if _, err := m.Handle(forward(t, "did:key:b", 10)); code(err) != didcomm.CodeUnauthorized {
		t.Fatalf("forward to removed recipient: %v", err)
	}
	if _, err := m.Handle(forward(t, "did:key:a", 2000)); code(err) != didcomm.CodeTooBig {
		t.Fatalf("oversized forward: %v", err)
	}
	r, err := m.Handle(authed("did:key:leaf1", mediation.TypeDeliveryRequest, mediation.DeliveryRequestBody{Limit: 10}))
	if err != nil || r.Type != mediation.TypeDelivery || len(r.Attachments) != 2 {
		t.Fatalf("delivery of %d (batch bound 2): %v", len(r.Attachments), err)
	}
	if _, err := m.Handle(authed("did:key:leaf1", mediation.TypeDeliveryRequest, mediation.DeliveryRequestBody{Limit: 0})); code(err) != didcomm.CodeMalformed {
		t.Fatalf("limit 0: %v", err)
	}
	r, err = m.Handle(authed("did:key:leaf1", mediation.TypeMessagesReceived, mediation.MessagesReceivedBody{MessageIDList: []string{r.Attachments[0].ID, r.Attachments[1].ID, "unknown"}}))
	if err != nil {
		t.Fatal(err)
	}
	var st mediation.StatusBody
	if err := json.Unmarshal(r.Body, &st); err != nil || st.MessageCount != 1 {
		t.Fatalf("status after ack %+v %v", st, err)
	}
	if _, err := m.Handle(&didcomm.Unpacked{Message: authed("did:key:leaf1", mediation.TypeStatusRequest, nil).Message}); code(err) != didcomm.CodeUnauthorized {
		t.Fatalf("unauthenticated status: %v", err)
	}
}

// FuzzHandle feeds arbitrary plaintext messages, as if authenticated from
// a granted leaf, to the mediator: every body decoder of coordinate
// mediation, pickup and forward.
func FuzzHandle(f *testing.F) {
	m, err := Open(f.TempDir(), "did:key:mediator", DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	if _, err := m.Handle(authed("did:key:leaf", mediation.TypeMediateRequest, nil)); err != nil {
		f.Fatal(err)
	}
	if _, err := m.Handle(authed("did:key:leaf", mediation.TypeRecipientUpdate, mediation.RecipientUpdateBody{Updates: []mediation.Update{{RecipientDID: "did:key:leaf", Action: "add"}}})); err != nil {
		f.Fatal(err)
	}
	for _, seed := range []*didcomm.Unpacked{
		authed("did:key:leaf", mediation.TypeRecipientUpdate, mediation.RecipientUpdateBody{Updates: []mediation.Update{{RecipientDID: "did:key:x", Action: "add"}}}),
		authed("did:key:leaf", mediation.TypeRecipientQuery, nil),
		authed("did:key:leaf", mediation.TypeStatusRequest, map[string]string{"recipient_did": "did:key:leaf"}),
		authed("did:key:leaf", mediation.TypeDeliveryRequest, mediation.DeliveryRequestBody{Limit: 5}),
		authed("did:key:leaf", mediation.TypeMessagesReceived, mediation.MessagesReceivedBody{MessageIDList: []string{"a"}}),
		authed("did:key:leaf", mediation.TypeLiveDeliveryChange, map[string]bool{"live_delivery": true}),
	} {
		b, _ := json.Marshal(seed.Message)
		f.Add(b)
	}
	fwd, _ := routing.Wrap([]byte(`{"ciphertext":"x"}`), "did:key:leaf", "did:key:mediator")
	b, _ := json.Marshal(fwd)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var msg didcomm.Message
		if json.Unmarshal(data, &msg) != nil {
			return
		}
		msg.From = "did:key:leaf"
		r, err := m.Handle(&didcomm.Unpacked{Message: &msg, Authenticated: true, Encrypted: true})
		if err != nil {
			var p *didcomm.Problem
			if !errors.As(err, &p) || p.Code == "" {
				t.Fatalf("error without a problem code: %v", err)
			}
			return
		}
		if r != nil && (r.Thid != msg.Thread() || len(r.To) != 1 || r.To[0] != "did:key:leaf") {
			t.Fatalf("reply %+v not threaded to the request", r)
		}
	})
}
