package nostr

import (
	"reflect"
	"strings"
	"testing"
)

// fastEventSeeds are EVENT messages of the shapes clients send (the first
// fastSeeds of them, which the shortcut takes), then the near misses it
// must leave to encoding/json.
func fastEventSeeds(t testing.TB) []string {
	k, err := SecretKeyFromBytes(append(make([]byte, 31), 9))
	if err != nil {
		t.Fatal(err)
	}
	e := &Event{
		CreatedAt: 1700000000, Kind: 1,
		Tags:    Tags{{"e", strings.Repeat("ab", 32), "wss://r.example", "reply"}, {"p", strings.Repeat("cd", 32)}, {"t", "x\ty"}},
		Content: "line\n\"quoted\" \\ tab\t é 🎉 </>",
	}
	if err := k.Sign(e); err != nil {
		t.Fatal(err)
	}
	js := string(e.AppendJSON(nil))
	id, pk, sig := e.IDHex(), e.PubKeyHex(), js[strings.Index(js, `"sig":"`)+7:len(js)-2]
	obj := func(fields string) string { return `["EVENT",{` + fields + `}]` }
	all := `"id":"` + id + `","pubkey":"` + pk + `","created_at":1700000000,"kind":1,"tags":[],"content":"","sig":"` + sig + `"`
	return []string{
		`["EVENT",` + js + `]`,
		" [ \"EVENT\" ,\n" + js + "\t]\r\n",
		obj(all),
		obj(strings.Replace(all, `"tags":[]`, `"tags":[["a"],["b","c"]]`, 1)),
		obj(strings.Replace(all, `"content":""`, `"content":"a\/b\b\f\r"`, 1)),
		obj(strings.Replace(all, `"content":""`, `"content":"\u00e9\/"`, 1)),
		obj(strings.Replace(all, `"content":""`, "\"content\":\"\xff\"", 1)),
		obj(strings.Replace(all, `"kind":1`, `"kind":65536`, 1)),
		obj(strings.Replace(all, `"kind":1`, `"kind":1.0`, 1)),
		obj(strings.Replace(all, `"kind":1`, `"kind":01`, 1)),
		obj(strings.Replace(all, `"kind":1`, `"kind":-0`, 1)),
		obj(strings.Replace(all, `"created_at":1700000000`, `"created_at":9223372036854775807`, 1)),
		obj(strings.Replace(all, `"tags":[]`, `"tags":[[]]`, 1)),
		obj(strings.Replace(all, `"tags":[]`, `"tags":null`, 1)),
		obj(strings.Replace(all, `"tags":[]`, `"tags":[["a",null]]`, 1)),
		obj(strings.Replace(all, `"id"`, `"ID"`, 1)),
		obj(all + `,"kind":2`),
		obj(all + `,"extra":{"x":[1,2]}`),
		obj(strings.Replace(all, `"id":"`+id, `"id":"`+strings.ToUpper(id), 1)),
		obj(strings.Replace(all, `,"sig":"`+sig+`"`, ``, 1)),
		`["EVENT",` + js + `,1]`,
		`["EVENT",` + js + `]x`,
		`["EVENT",` + js,
		`["AUTH",` + js + `]`,
		`["EVENT"]`,
	}
}

// relaySeed turns a client EVENT seed into the relay-to-client shape,
// with a subscription id that has an escape in it.
func relaySeed(s string) string { return strings.Replace(s, `"EVENT"`, `"EVENT", "s\tub"`, 1) }

// TestParseEventFastAgrees checks the seeds without the fuzzer: wherever
// the shortcut answers, the general parser gives the same message.
func TestParseEventFastAgrees(t *testing.T) {
	for i, s := range fastEventSeeds(t) {
		for _, s := range []string{s, relaySeed(s)} {
			if took := checkFastAgrees(t, []byte(s)); took != (i < fastSeeds) {
				t.Errorf("seed %d %q: shortcut taken = %v", i, s, took)
			}
		}
	}
}

const fastSeeds = 5

// checkFastAgrees tries both shapes of the shortcut on data and reports
// whether either took it.
func checkFastAgrees(t *testing.T, data []byte) bool {
	t.Helper()
	took := false
	if _, fast, ok := parseEventFast(data, false); ok {
		took = true
		slow, err := parseClientMessageJSON(data)
		if err != nil {
			t.Fatalf("shortcut accepted %q, encoding/json path says %v", data, err)
		}
		if want := (&ClientMessage{Type: MsgEvent, Event: fast}); !reflect.DeepEqual(want, slow) {
			t.Fatalf("%q:\nshortcut %+v\njson     %+v", data, *fast, *slow.Event)
		}
	}
	if sub, fast, ok := parseEventFast(data, true); ok {
		took = true
		slow, err := parseRelayMessageJSON(data)
		if err != nil {
			t.Fatalf("shortcut accepted %q, encoding/json path says %v", data, err)
		}
		if want := (&RelayMessage{Type: MsgEvent, SubID: sub, Event: fast}); !reflect.DeepEqual(want, slow) {
			t.Fatalf("%q:\nshortcut %q %+v\njson     %+v", data, sub, *fast, *slow)
		}
	}
	return took
}

// FuzzParseEventFast holds the EVENT shortcut to the encoding/json paths on
// mutated messages: whatever it accepts must decode identically there.
func FuzzParseEventFast(f *testing.F) {
	for _, s := range fastEventSeeds(f) {
		f.Add([]byte(s))
		f.Add([]byte(relaySeed(s)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastAgrees(t, data)
	})
}
