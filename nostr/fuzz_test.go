package nostr

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// FuzzMessages feeds each input to both message parsers. Whatever one
// accepts must encode to a frame that it parses back to the same message,
// so that the encoders and parsers cannot drift apart; a parsed event must
// also keep its canonical serialization through its JSON.
func FuzzMessages(f *testing.F) {
	k, _ := GenerateSecretKey()
	e := &Event{CreatedAt: 5, Kind: 1, Tags: Tags{{"e", "abc"}}, Content: "hi"}
	_ = k.Sign(e)
	ev := string(e.AppendJSON(nil))
	for _, s := range []string{
		// client to relay
		`["EVENT",` + ev + `]`,
		`["REQ","s",{"ids":["` + e.IDHex() + `"],"#e":["abc"],"since":1,"until":9,"limit":2}]`,
		`["CLOSE","s"]`, `["COUNT","s",{}]`, `["NEG-OPEN","s",{},"61"]`, `["NEG-MSG","s","61"]`,
		`["NEG-CLOSE","s"]`, `["AUTH",{}]`, `["AUTH",` + ev + `]`,
		`[`, `["REQ","s",{"kinds":[1e3]}]`, `["REQ","s",{"limit":1.5}]`,
		// relay to client
		`["EVENT","s",` + ev + `]`,
		`["OK","` + e.IDHex() + `",false,"blocked: no"]`,
		`["EOSE","s"]`, `["CLOSED","s","auth-required: x"]`, `["CLOSED","s"]`, `["NOTICE","n"]`,
		`["AUTH","c"]`, `["NEG-MSG","n","61"]`, `["NEG-ERR","n","x"]`, `["COUNT","c",{"count":1}]`,
		`["COUNT","c",{"count":2,"approximate":true}]`,
		`[]`, `{}`, `["OK"]`, `[null,null]`, `["EVENT","s",{"tags":[[1]]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := ParseClientMessage(data); err != nil {
			if m != nil {
				t.Fatal("client message and error both returned")
			}
		} else {
			checkClientMessage(t, m)
		}
		m, err := ParseRelayMessage(data)
		if err != nil {
			if m != nil {
				t.Fatal("relay message and error both returned")
			}
			return
		}
		if m.Type == MsgEvent && m.Event == nil {
			t.Fatal("EVENT without an event")
		}
		enc := m.AppendJSON(nil)
		back, err := ParseRelayMessage(enc)
		if err != nil {
			t.Fatalf("re-encoded %s does not parse: %v", enc, err)
		}
		if again := back.AppendJSON(nil); !bytes.Equal(again, enc) {
			t.Fatalf("relay message encodes as %s, then as %s", enc, again)
		}
	})
}

func checkClientMessage(t *testing.T, m *ClientMessage) {
	t.Helper()
	if m.Event != nil {
		var back Event
		if err := json.Unmarshal(m.Event.AppendJSON(nil), &back); err != nil {
			t.Fatalf("re-encoded event does not parse: %v", err)
		}
		if back.ComputeID() != m.Event.ComputeID() {
			t.Fatal("JSON round trip changed the canonical serialization")
		}
	}
	enc := m.AppendJSON(nil)
	back, err := ParseClientMessage(enc)
	if err != nil {
		t.Fatalf("re-encoded %s does not parse: %v", enc, err)
	}
	if again := back.AppendJSON(nil); !bytes.Equal(again, enc) {
		t.Fatalf("client message encodes as %s, then as %s", enc, again)
	}
}

// referenceMatch is a deliberately plain reading of NIP-01's matching rules
// over generic JSON, to check Filter.Matches against.
func referenceMatch(filter map[string]any, event map[string]any) bool {
	in := func(list any, v any) bool {
		for _, x := range list.([]any) {
			if fmt.Sprint(x) == fmt.Sprint(v) {
				return true
			}
		}
		return false
	}
	for key, cond := range filter {
		switch {
		case key == "ids" && !in(cond, event["id"]):
			return false
		case key == "authors" && !in(cond, event["pubkey"]):
			return false
		case key == "kinds" && !in(cond, event["kind"]):
			return false
		case key == "since" && event["created_at"].(float64) < cond.(float64):
			return false
		case key == "until" && event["created_at"].(float64) > cond.(float64):
			return false
		case strings.HasPrefix(key, "#"):
			found := false
			for _, tag := range event["tags"].([]any) {
				tag := tag.([]any)
				if len(tag) >= 2 && tag[0] == key[1:] && in(cond, tag[1]) {
					found = true
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

func FuzzFilterMatches(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(99), uint64(7))
	f.Fuzz(func(t *testing.T, seedA, seedB uint64) {
		r := rand.New(rand.NewPCG(seedA, seedB))
		ids := [][32]byte{{1}, {2}, {3}}
		letters := []string{"e", "p", "t"}
		values := []string{"a", "b", "c", ""}
		ev := &Event{ID: ids[r.IntN(3)], PubKey: ids[r.IntN(3)], CreatedAt: int64(r.IntN(5)), Kind: r.IntN(4)}
		for n := r.IntN(4); n > 0; n-- {
			tag := []string{letters[r.IntN(3)]}
			if r.IntN(4) > 0 {
				tag = append(tag, values[r.IntN(4)])
			}
			ev.Tags = append(ev.Tags, tag)
		}
		filter := map[string]any{}
		pickHex := func() []any {
			var out []any
			for n := r.IntN(3); n > 0; n-- {
				out = append(out, hex.EncodeToString(ids[r.IntN(3)][:]))
			}
			return append([]any{}, out...)
		}
		if r.IntN(3) == 0 {
			filter["ids"] = pickHex()
		}
		if r.IntN(3) == 0 {
			filter["authors"] = pickHex()
		}
		if r.IntN(3) == 0 {
			ks := []any{}
			for n := r.IntN(3); n > 0; n-- {
				ks = append(ks, float64(r.IntN(4)))
			}
			filter["kinds"] = ks
		}
		if r.IntN(3) == 0 {
			filter["since"] = float64(r.IntN(5))
		}
		if r.IntN(3) == 0 {
			filter["until"] = float64(r.IntN(5))
		}
		for _, l := range letters {
			if r.IntN(3) == 0 {
				vs := []any{}
				for n := r.IntN(3); n > 0; n-- {
					vs = append(vs, values[r.IntN(4)])
				}
				filter["#"+l] = vs
			}
		}
		fj, _ := json.Marshal(filter)
		var flt Filter
		if err := json.Unmarshal(fj, &flt); err != nil {
			t.Fatalf("filter %s: %v", fj, err)
		}
		var generic map[string]any
		if err := json.Unmarshal(ev.AppendJSON(nil), &generic); err != nil {
			t.Fatal(err)
		}
		if got, want := flt.Matches(ev), referenceMatch(filter, generic); got != want {
			t.Fatalf("filter %s on event %s: Matches = %v, reference = %v", fj, ev.AppendJSON(nil), got, want)
		}
	})
}
