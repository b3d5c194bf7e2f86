package nostr

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// signedNote is a small signed event for message tests.
func signedNote(t testing.TB) *Event {
	t.Helper()
	seed := make([]byte, 32)
	seed[31] = 7
	k, err := SecretKeyFromBytes(seed)
	if err != nil {
		t.Fatal(err)
	}
	ev := &Event{CreatedAt: 1700000000, Kind: 1, Tags: Tags{{"t", "x"}}, Content: "hello \"there\"\n"}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestParseRelayMessage(t *testing.T) {
	ev := signedNote(t)
	evJSON := string(ev.AppendJSON(nil))
	id := ev.IDHex()
	cases := []struct {
		in      string
		want    RelayMessage
		wantErr string
	}{
		{`["EVENT","s1",` + evJSON + `]`, RelayMessage{Type: MsgEvent, SubID: "s1", Event: ev}, ""},
		{`["OK","` + id + `",true,""]`, RelayMessage{Type: MsgOK, EventID: ev.ID, OK: true}, ""},
		{`["OK","` + id + `",false,"auth-required: sign in"]`, RelayMessage{Type: MsgOK, EventID: ev.ID, Text: "auth-required: sign in"}, ""},
		{`["EOSE","s1"]`, RelayMessage{Type: MsgEOSE, SubID: "s1"}, ""},
		{`["CLOSED","s1","error: shutting down"]`, RelayMessage{Type: MsgClosed, SubID: "s1", Text: "error: shutting down"}, ""},
		{`["CLOSED","s1"]`, RelayMessage{Type: MsgClosed, SubID: "s1"}, ""},
		{`["NOTICE","hi"]`, RelayMessage{Type: MsgNotice, Text: "hi"}, ""},
		{`["AUTH","challenge-1"]`, RelayMessage{Type: MsgAuth, Text: "challenge-1"}, ""},
		{`["NEG-MSG","n","6100"]`, RelayMessage{Type: MsgNegMsg, SubID: "n", NegMsg: "6100"}, ""},
		{`["NEG-ERR","n","blocked: too big"]`, RelayMessage{Type: MsgNegErr, SubID: "n", Text: "blocked: too big"}, ""},
		{`["COUNT","c",{"count":3}]`, RelayMessage{Type: MsgCount, SubID: "c", Count: 3}, ""},
		{`["COUNT","c",{"count":3,"approximate":true}]`, RelayMessage{Type: MsgCount, SubID: "c", Count: 3, Approximate: true}, ""},
		{`{}`, RelayMessage{}, "not a JSON array"},
		{`[`, RelayMessage{}, "not a JSON array"},
		{`[]`, RelayMessage{}, "empty array"},
		{`[1]`, RelayMessage{}, "type is not a string"},
		{`["EVENT","s1"]`, RelayMessage{}, "want 3"},
		{`["EVENT",1,{}]`, RelayMessage{}, "subscription id is not a string"},
		{`["EVENT","s1",{"id":"zz"}]`, RelayMessage{}, "EVENT:"},
		{`["EVENT","s1",null]`, RelayMessage{}, `EVENT: event has no "id"`},
		{`["OK","abc",true,""]`, RelayMessage{}, "64 hex"},
		{`["OK","` + strings.ToUpper(id) + `",true,""]`, RelayMessage{}, "64 hex"},
		{`["OK","` + id + `","yes",""]`, RelayMessage{}, "not a boolean"},
		{`["OK","` + id + `",true]`, RelayMessage{}, "want 4"},
		{`["OK","` + id + `",true,5]`, RelayMessage{}, "message is not a string"},
		{`["EOSE"]`, RelayMessage{}, "missing subscription id"},
		{`["CLOSED","s1",false]`, RelayMessage{}, "message is not a string"},
		{`["NEG-MSG","n"]`, RelayMessage{}, "missing payload"},
		{`["NEG-MSG","n",61]`, RelayMessage{}, "payload is not a string"},
		{`["NOTICE"]`, RelayMessage{}, "missing text"},
		{`["AUTH",{}]`, RelayMessage{}, "text is not a string"},
		{`["COUNT","c"]`, RelayMessage{}, "want 3"},
		{`["COUNT","c",{}]`, RelayMessage{}, "non-negative integer"},
		{`["COUNT","c",{"count":-1}]`, RelayMessage{}, "non-negative integer"},
		{`["COUNT","c",{"count":1.5}]`, RelayMessage{}, "non-negative integer"},
		{`["WHAT","x"]`, RelayMessage{}, "unknown relay message type"},
	}
	for _, tc := range cases {
		got, err := ParseRelayMessage([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.wantErr)
			}
			if got != nil {
				t.Errorf("%s: message and error both returned", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.in, *got, tc.want)
		}
	}
	if _, err := ParseRelayMessage([]byte(`["X"]`)); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v, want ErrUnknownType", err)
	}
}

// TestRelayMessageEncoding holds AppendJSON to the exact frames relays
// have always sent, and ParseRelayMessage to reading each back.
func TestRelayMessageEncoding(t *testing.T) {
	ev := signedNote(t)
	evJSON := string(ev.AppendJSON(nil))
	id := ev.IDHex()
	for _, tc := range []struct {
		m    RelayMessage
		want string
	}{
		{RelayMessage{Type: MsgEvent, SubID: "s\"1", Event: ev}, `["EVENT","s\"1",` + evJSON + `]`},
		{RelayMessage{Type: MsgOK, EventID: ev.ID, OK: true}, `["OK","` + id + `",true,""]`},
		{RelayMessage{Type: MsgOK, EventID: ev.ID, Text: "invalid: bad\nthing"}, `["OK","` + id + `",false,"invalid: bad\nthing"]`},
		{RelayMessage{Type: MsgEOSE, SubID: "s"}, `["EOSE","s"]`},
		{RelayMessage{Type: MsgClosed, SubID: "s", Text: "error: x"}, `["CLOSED","s","error: x"]`},
		{RelayMessage{Type: MsgNotice, Text: "invalid: no"}, `["NOTICE","invalid: no"]`},
		{RelayMessage{Type: MsgAuth, Text: "ch"}, `["AUTH","ch"]`},
		{RelayMessage{Type: MsgCount, SubID: "c", Count: 12}, `["COUNT","c",{"count":12}]`},
		{RelayMessage{Type: MsgCount, SubID: "c", Count: 1, Approximate: true}, `["COUNT","c",{"count":1,"approximate":true}]`},
		{RelayMessage{Type: MsgNegMsg, SubID: "n", NegMsg: "6100"}, `["NEG-MSG","n","6100"]`},
		{RelayMessage{Type: MsgNegErr, SubID: "n", Text: "blocked: too big"}, `["NEG-ERR","n","blocked: too big"]`},
	} {
		got := string(tc.m.AppendJSON(nil))
		if got != tc.want {
			t.Errorf("%s: AppendJSON = %s, want %s", tc.m.Type, got, tc.want)
			continue
		}
		back, err := ParseRelayMessage([]byte(got))
		if err != nil {
			t.Errorf("%s: does not parse back: %v", got, err)
			continue
		}
		if !reflect.DeepEqual(*back, tc.m) {
			t.Errorf("%s: parsed back as %+v", got, *back)
		}
	}
	raw := AppendEventMessage([]byte("x"), "s", func(b []byte) []byte { return append(b, evJSON...) })
	if string(raw) != `x["EVENT","s",`+evJSON+`]` {
		t.Errorf("AppendEventMessage = %s", raw)
	}
}

// TestClientMessageEncoding holds ClientMessage.AppendJSON to the frames
// clients send, and ParseClientMessage to reading each back.
func TestClientMessageEncoding(t *testing.T) {
	ev := signedNote(t)
	evJSON := string(ev.AppendJSON(nil))
	f := Filter{Kinds: []int{1}, Since: 5, Limit: 0, HasLimit: true, Tags: map[string][]string{"t": {"a"}}}
	g := Filter{IDs: [][32]byte{ev.ID}}
	for _, tc := range []struct {
		m    ClientMessage
		want string
	}{
		{ClientMessage{Type: MsgEvent, Event: ev}, `["EVENT",` + evJSON + `]`},
		{ClientMessage{Type: MsgAuth, Event: ev}, `["AUTH",` + evJSON + `]`},
		{ClientMessage{Type: MsgReq, SubID: "s", Filters: []Filter{f, g}}, `["REQ","s",{"#t":["a"],"kinds":[1],"limit":0,"since":5},{"ids":["` + ev.IDHex() + `"]}]`},
		{ClientMessage{Type: MsgCount, SubID: "c", Filters: []Filter{{}}}, `["COUNT","c",{}]`},
		{ClientMessage{Type: MsgClose, SubID: "s"}, `["CLOSE","s"]`},
		{ClientMessage{Type: MsgNegOpen, SubID: "n", Filters: []Filter{f}, NegMsg: "6100"}, `["NEG-OPEN","n",{"#t":["a"],"kinds":[1],"limit":0,"since":5},"6100"]`},
		{ClientMessage{Type: MsgNegMsg, SubID: "n", NegMsg: "61"}, `["NEG-MSG","n","61"]`},
		{ClientMessage{Type: MsgNegClose, SubID: "n"}, `["NEG-CLOSE","n"]`},
	} {
		got := string(tc.m.AppendJSON(nil))
		if got != tc.want {
			t.Errorf("%s: AppendJSON = %s, want %s", tc.m.Type, got, tc.want)
			continue
		}
		back, err := ParseClientMessage([]byte(got))
		if err != nil {
			t.Errorf("%s: does not parse back: %v", got, err)
			continue
		}
		if !reflect.DeepEqual(*back, tc.m) {
			t.Errorf("%s: parsed back as %+v", got, *back)
		}
	}
}
