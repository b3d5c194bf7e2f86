package announce

import (
	"encoding/json"
	"testing"
)

func TestParseRelayMsg(t *testing.T) {
	cases := []struct {
		in        string
		ok        bool
		typ, id   string
		restCount int
	}{
		{`["EVENT","s",{"id":"x"}]`, true, "EVENT", "s", 1},
		{`["EOSE","s"]`, true, "EOSE", "s", 0},
		{`["OK","abc",false,"blocked: no"]`, true, "OK", "abc", 2},
		{`["NOTICE","hi"]`, true, "NOTICE", "hi", 0},
		{`["EOSE",7]`, true, "EOSE", "", 0},
		{`["EOSE"]`, true, "EOSE", "", 0},
		{`[]`, false, "", "", 0},
		{`[1,"s"]`, false, "", "", 0},
		{`{"EVENT":1}`, false, "", "", 0},
		{`not json`, false, "", "", 0},
	}
	for _, c := range cases {
		m, ok := parseRelayMsg([]byte(c.in))
		if ok != c.ok || m.typ != c.typ || m.first != c.id || len(m.rest) != c.restCount {
			t.Errorf("parseRelayMsg(%s) = %+v, %v", c.in, m, ok)
		}
	}
}

func FuzzParseRelayMsg(f *testing.F) {
	for _, s := range []string{`["EVENT","fleetmesh-join",{"kind":31166}]`, `["OK","ab",true,""]`, `["EOSE","x"]`, `["CLOSED","x","error: no"]`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, ok := parseRelayMsg(data)
		if !ok {
			return
		}
		// What was read encodes back to a message that reads the same.
		arr := []any{m.typ}
		if m.first != "" || len(m.rest) > 0 {
			arr = append(arr, m.first)
		}
		for _, r := range m.rest {
			arr = append(arr, r)
		}
		b, err := json.Marshal(arr)
		if err != nil {
			t.Fatal(err)
		}
		again, ok := parseRelayMsg(b)
		if !ok || again.typ != m.typ || again.first != m.first || len(again.rest) != len(m.rest) {
			t.Fatalf("%s read as %+v, re-encoded %s read as %+v", data, m, b, again)
		}
	})
}
