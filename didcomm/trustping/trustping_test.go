package trustping

import (
	"encoding/json"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
)

func TestAnswer(t *testing.T) {
	ping, err := NewPing("did:key:a", "did:key:b")
	if err != nil {
		t.Fatal(err)
	}
	no := false
	quiet, _ := didcomm.NewMessage(TypePing, PingBody{ResponseRequested: &no})
	bare, _ := didcomm.NewMessage(TypePing, nil)
	for _, tc := range []struct {
		name     string
		ping     *didcomm.Message
		wantResp bool
		code     string
	}{
		{"requested", ping, true, ""},
		{"absent means requested", bare, true, ""},
		{"not requested", quiet, false, ""},
		{"malformed body", &didcomm.Message{ID: "x", Type: TypePing, Body: json.RawMessage(`{"response_requested":"yes"}`)}, false, didcomm.CodeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Answer(tc.ping, "did:key:b")
			if tc.code != "" {
				if p, ok := err.(*didcomm.Problem); !ok || p.Code != tc.code {
					t.Fatalf("err %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil || (r != nil) != tc.wantResp {
				t.Fatalf("response %+v err %v", r, err)
			}
			if r != nil && !IsResponseTo(r, tc.ping.ID) {
				t.Fatalf("response thid %s for ping %s", r.Thid, tc.ping.ID)
			}
		})
	}
}
