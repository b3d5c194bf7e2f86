package routing

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

func party(t testing.TB) *didcomm.Secrets {
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := didcomm.SecretsFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRouteThroughMediator(t *testing.T) {
	sender, leaf, mediator := party(t), party(t), party(t)
	p := &didcomm.Packer{Secrets: sender, Resolver: didcomm.DIDKeyResolver{}}
	m, _ := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": "for the leaf"})
	m.To = []string{leaf.DID}
	inner, err := p.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		t.Fatal(err)
	}
	outer, err := Route(p, inner, leaf.DID, mediator.DID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&didcomm.Unpacker{Secrets: mediator, Resolver: didcomm.DIDKeyResolver{}}).Unpack(outer)
	if err != nil {
		t.Fatal(err)
	}
	if got.Authenticated {
		t.Fatal("the mediator learned the sender")
	}
	next, packed, err := Unwrap(got.Message)
	if err != nil || next != leaf.DID {
		t.Fatalf("next %s err %v", next, err)
	}
	final, err := (&didcomm.Unpacker{Secrets: leaf, Resolver: didcomm.DIDKeyResolver{}}).Unpack(packed)
	if err != nil || final.Message.ID != m.ID || final.Message.From != sender.DID {
		t.Fatalf("leaf got %+v %v", final, err)
	}
}

func TestUnwrapErrors(t *testing.T) {
	ok := []didcomm.Attachment{{Data: didcomm.AttachmentData{JSON: json.RawMessage(`{"ciphertext":"x"}`)}}}
	b64 := []didcomm.Attachment{{Data: didcomm.AttachmentData{Base64: base64.StdEncoding.EncodeToString([]byte(`{"ciphertext":"x"}`))}}}
	for _, tc := range []struct {
		name string
		m    *didcomm.Message
		code string
	}{
		{"json attachment", &didcomm.Message{Type: TypeForward, Body: []byte(`{"next":"did:key:z"}`), Attachments: ok}, ""},
		{"base64 attachment", &didcomm.Message{Type: TypeForward, Body: []byte(`{"next":"did:key:z"}`), Attachments: b64}, ""},
		{"wrong type", &didcomm.Message{Type: "x", Body: []byte(`{}`)}, didcomm.CodeUnsupportedType},
		{"no next", &didcomm.Message{Type: TypeForward, Body: []byte(`{}`), Attachments: ok}, didcomm.CodeMalformed},
		{"no attachment", &didcomm.Message{Type: TypeForward, Body: []byte(`{"next":"did:key:z"}`)}, didcomm.CodeMalformed},
		{"bad base64", &didcomm.Message{Type: TypeForward, Body: []byte(`{"next":"did:key:z"}`), Attachments: []didcomm.Attachment{{Data: didcomm.AttachmentData{Base64: "%%%"}}}}, didcomm.CodeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Unwrap(tc.m)
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if p, ok := err.(*didcomm.Problem); !ok || p.Code != tc.code {
				t.Fatalf("err %v, want %s", err, tc.code)
			}
		})
	}
}

func FuzzUnwrap(f *testing.F) {
	m, _ := Wrap([]byte(`{"ciphertext":"x"}`), "did:key:z6Mk", "did:key:z6Mm")
	seed, _ := json.Marshal(m)
	f.Add(seed)
	f.Add([]byte(`{"id":"1","type":"https://didcomm.org/routing/2.0/forward","body":{"next":"x"},"attachments":[{"data":{"base64":"e30"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m didcomm.Message
		if json.Unmarshal(data, &m) != nil {
			return
		}
		next, packed, err := Unwrap(&m)
		if err != nil {
			if _, ok := err.(*didcomm.Problem); !ok {
				t.Fatalf("error is not a *Problem: %v", err)
			}
			return
		}
		if next == "" || !json.Valid(packed) {
			t.Fatalf("accepted next %q payload %q", next, packed)
		}
	})
}
