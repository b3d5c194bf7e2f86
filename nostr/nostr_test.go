package nostr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func mustKey(t testing.TB) SecretKey {
	t.Helper()
	k, err := GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSerializeEscaping(t *testing.T) {
	e := Event{CreatedAt: 1, Kind: 1, Tags: Tags{{"t", "a\"b"}}, Content: "line\n\ttab\\ \x01 é / </>\u2028"}
	got := string(e.Serialize(nil))
	want := `[0,"0000000000000000000000000000000000000000000000000000000000000000",1,1,[["t","a\"b"]],"line\n\ttab\\ \u0001 é / </>` + "\u2028" + `"]`
	if got != want {
		t.Fatalf("Serialize:\n got %s\nwant %s", got, want)
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	k := mustKey(t)
	e := &Event{CreatedAt: 1700000000, Kind: 1, Tags: Tags{{"p", "x"}, {"e", "y", "wss://r"}}, Content: "héllo\n"}
	if err := k.Sign(e); err != nil {
		t.Fatal(err)
	}
	if err := e.Verify(); err != nil {
		t.Fatalf("fresh event: %v", err)
	}
	var back Event
	if err := json.Unmarshal(e.AppendJSON(nil), &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Fatalf("after JSON round trip: %v", err)
	}
	tampered := back
	tampered.Content = "bye"
	if err := tampered.Verify(); !errors.Is(err, ErrBadID) {
		t.Fatalf("tampered content: %v", err)
	}
	resigned := back
	resigned.Sig[5] ^= 1
	if err := resigned.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("flipped signature bit: %v", err)
	}
	if c := e.CID(); !strings.HasPrefix(c.String(), "bafkrei") {
		t.Fatalf("CID %s is not CIDv1 raw sha2-256", c)
	}
}

func TestKindClasses(t *testing.T) {
	for _, tc := range []struct {
		kind int
		want KindClass
	}{
		{0, Replaceable}, {1, Regular}, {3, Replaceable}, {4, Regular}, {9999, Regular},
		{10000, Replaceable}, {19999, Replaceable}, {20000, Ephemeral}, {29999, Ephemeral},
		{30000, Addressable}, {39999, Addressable}, {40000, Regular},
	} {
		if got := ClassOf(tc.kind); got != tc.want {
			t.Errorf("ClassOf(%d) = %v, want %v", tc.kind, got, tc.want)
		}
	}
}

func TestParseClientMessage(t *testing.T) {
	k := mustKey(t)
	e := &Event{CreatedAt: 1, Kind: 1, Tags: Tags{}, Content: "x"}
	if err := k.Sign(e); err != nil {
		t.Fatal(err)
	}
	ev := string(e.AppendJSON(nil))
	for _, tc := range []struct {
		in      string
		typ     string
		wantErr string
		subID   string
	}{
		{`["EVENT",` + ev + `]`, MsgEvent, "", ""},
		{`["REQ","s1",{"kinds":[1],"#t":["a"],"limit":5},{"authors":[]}]`, MsgReq, "", "s1"},
		{`["CLOSE","s1"]`, MsgClose, "", "s1"},
		{`["COUNT","c",{}]`, MsgCount, "", "c"},
		{`["NEG-OPEN","n",{},"6100"]`, MsgNegOpen, "", "n"},
		{`["NEG-MSG","n","61"]`, MsgNegMsg, "", "n"},
		{`["NEG-CLOSE","n"]`, MsgNegClose, "", "n"},
		{`{}`, "", "not a JSON array", ""},
		{`[]`, "", "empty array", ""},
		{`[1]`, "", "message type", ""},
		{`["HELLO"]`, "", "unknown message type", ""},
		{`["REQ","s"]`, "", "subscription id", ""},
		{`["REQ","",{}]`, "", "1 to 64", ""},
		{`["REQ","` + strings.Repeat("x", 65) + `",{}]`, "", "1 to 64", ""},
		{`["REQ","s",{"ids":["ABC"]}]`, "", "lowercase hex", "s"},
		{`["REQ","s",{"kinds":"1"}]`, "", "wrong JSON type", "s"},
		{`["REQ","s",{"since":-1}]`, "", "non-negative", "s"},
		{`["EVENT",{"id":"00"}]`, "", `no "pubkey"`, ""},
		{`["EVENT",{"id":"00","pubkey":"","created_at":1,"kind":1,"tags":[],"content":"","sig":""}]`, "", "64 lowercase hex", ""},
		{`["EVENT",{}]`, "", `no "id"`, ""},
	} {
		m, err := ParseClientMessage([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want it to mention %q", tc.in, err, tc.wantErr)
			}
			var pe *ParseError
			if err != nil && errors.As(err, &pe) && pe.SubID != tc.subID {
				t.Errorf("%s: ParseError.SubID = %q, want %q", tc.in, pe.SubID, tc.subID)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if m.Type != tc.typ || m.SubID != tc.subID {
			t.Errorf("%s: got type %q sub %q", tc.in, m.Type, m.SubID)
		}
	}
}

func TestFilterEmptyAndLimit(t *testing.T) {
	var f Filter
	if err := json.Unmarshal([]byte(`{"authors":[],"limit":0}`), &f); err != nil {
		t.Fatal(err)
	}
	if !f.Empty() || !f.HasLimit || f.Limit != 0 {
		t.Fatalf("got %+v", f)
	}
	if err := json.Unmarshal([]byte(`{"until":0}`), &f); err != nil {
		t.Fatal(err)
	}
	if !f.HasUntil || f.Matches(&Event{CreatedAt: 1}) || !f.Matches(&Event{CreatedAt: 0}) {
		t.Fatalf("until:0 must match only created_at 0: %+v", f)
	}
}
