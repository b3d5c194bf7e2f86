package gateway

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

func signedEvent(t testing.TB) *nostr.Event {
	t.Helper()
	seed := make([]byte, 32)
	seed[31] = 7
	k, err := nostr.SecretKeyFromBytes(seed)
	if err != nil {
		t.Fatal(err)
	}
	ev := &nostr.Event{CreatedAt: 1700000000, Kind: 1, Tags: nostr.Tags{{"t", "x"}}, Content: "hello"}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestParseRelayMessage(t *testing.T) {
	ev := signedEvent(t)
	evJSON := string(ev.AppendJSON(nil))
	id := ev.IDHex()
	cases := []struct {
		in      string
		want    relayMsg
		wantErr string
	}{
		{`["EVENT","s1",` + evJSON + `]`, relayMsg{Type: msgEvent, SubID: "s1"}, ""},
		{`["OK","` + id + `",true,""]`, relayMsg{Type: msgOK, EventID: ev.ID, OK: true}, ""},
		{`["OK","` + id + `",false,"auth-required: sign in"]`, relayMsg{Type: msgOK, EventID: ev.ID, Text: "auth-required: sign in"}, ""},
		{`["EOSE","s1"]`, relayMsg{Type: msgEOSE, SubID: "s1"}, ""},
		{`["CLOSED","s1","error: shutting down"]`, relayMsg{Type: msgClosed, SubID: "s1", Text: "error: shutting down"}, ""},
		{`["CLOSED","s1"]`, relayMsg{Type: msgClosed, SubID: "s1"}, ""},
		{`["NOTICE","hi"]`, relayMsg{Type: msgNotice, Text: "hi"}, ""},
		{`["AUTH","challenge-1"]`, relayMsg{Type: msgAuth, Text: "challenge-1"}, ""},
		{`["NEG-MSG","n","6100"]`, relayMsg{Type: msgNegMsg, SubID: "n", Text: "6100"}, ""},
		{`["NEG-ERR","n","blocked: too big"]`, relayMsg{Type: msgNegErr, SubID: "n", Text: "blocked: too big"}, ""},
		{`["COUNT","c",{"count":3}]`, relayMsg{Type: msgCount, SubID: "c"}, ""},
		{`{}`, relayMsg{}, "not a JSON array"},
		{`[]`, relayMsg{}, "empty array"},
		{`[1]`, relayMsg{}, "type is not a string"},
		{`["EVENT","s1"]`, relayMsg{}, "want 3"},
		{`["EVENT",1,{}]`, relayMsg{}, "subscription id is not a string"},
		{`["EVENT","s1",{"id":"zz"}]`, relayMsg{}, "EVENT:"},
		{`["OK","abc",true,""]`, relayMsg{}, "64 hex"},
		{`["OK","` + id + `","yes",""]`, relayMsg{}, "not a boolean"},
		{`["OK","` + id + `",true]`, relayMsg{}, "want 4"},
		{`["NEG-MSG","n"]`, relayMsg{}, "missing payload"},
		{`["NOTICE"]`, relayMsg{}, "missing text"},
		{`["WHAT","x"]`, relayMsg{}, "unknown relay message type"},
	}
	for _, tc := range cases {
		got, err := parseRelayMessage([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got.Type == msgEvent {
			if got.Event == nil || got.Event.ID != ev.ID || got.Event.Verify() != nil {
				t.Errorf("%s: event not parsed intact", tc.in)
			}
			got.Event = nil
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.in, got, tc.want)
		}
	}
	if _, err := parseRelayMessage([]byte(`["X"]`)); !errors.Is(err, errUnknownType) {
		t.Errorf("unknown type: %v, want errUnknownType", err)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	ev := signedEvent(t)
	msg := frame(msgEvent, eventJSON(ev))
	want := `["EVENT",` + string(ev.AppendJSON(nil)) + `]`
	if string(msg) != want {
		t.Fatalf("frame = %s, want %s", msg, want)
	}
	f := nostr.Filter{Kinds: []int{1}, Since: 5, Limit: 0, HasLimit: true}
	if got := string(frame("REQ", "s", f)); got != `["REQ","s",{"kinds":[1],"limit":0,"since":5}]` {
		t.Fatalf("REQ frame = %s", got)
	}
}

// FuzzParseRelayMessage checks the decoder never panics and that whatever
// it accepts is internally consistent.
func FuzzParseRelayMessage(f *testing.F) {
	ev := signedEvent(f)
	for _, s := range []string{
		`["EVENT","s",` + string(ev.AppendJSON(nil)) + `]`,
		`["OK","` + hex.EncodeToString(ev.ID[:]) + `",false,"blocked: no"]`,
		`["EOSE","s"]`, `["CLOSED","s","auth-required: x"]`, `["NOTICE","n"]`,
		`["AUTH","c"]`, `["NEG-MSG","n","61"]`, `["NEG-ERR","n","x"]`, `["COUNT","c",{"count":1}]`,
		`[]`, `{}`, `["OK"]`, `[null,null]`, `["EVENT","s",{"tags":[[1]]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseRelayMessage(data)
		if err != nil {
			return
		}
		switch m.Type {
		case msgEvent:
			if m.Event == nil {
				t.Fatal("EVENT without an event")
			}
		case msgOK, msgEOSE, msgClosed, msgNotice, msgAuth, msgCount, msgNegMsg, msgNegErr:
		default:
			t.Fatalf("accepted unknown type %q", m.Type)
		}
	})
}
