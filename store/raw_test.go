package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

// rawSamples are events whose records exercise the Raw view: escapes,
// non-ASCII, empty and one-item tags, an expiration and none.
func rawSamples() []*nostr.Event {
	var pk [32]byte
	pk[0] = 7
	return []*nostr.Event{
		{PubKey: pk, CreatedAt: 1_700_000_000, Kind: 1, Tags: nostr.Tags{}, Content: "plain"},
		{PubKey: pk, CreatedAt: 5, Kind: 30023, Tags: nostr.Tags{{"d", "x"}, {"t", "a", "b"}, {"e"}, {}}, Content: "quote \" back\\ nl\n tab\t ctl\x01 über 🎉"},
		{PubKey: pk, CreatedAt: 9, Kind: 7, Tags: nostr.Tags{{"expiration", "1700000100"}, {"p", "\"x\""}}, Content: ""},
		{PubKey: pk, CreatedAt: 9, Kind: 7, Tags: nostr.Tags{{"expiration", "12a"}, {"expiration", "1"}}, Content: "+"},
	}
}

// TestRawAgreesWithEvent holds the in-place view of a record to the
// decoded event: the same JSON, fields, expiration and filter answers.
func TestRawAgreesWithEvent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i, e := range rawSamples() {
		for j := range e.ID {
			e.ID[j] = byte(r.Uint32())
		}
		for j := range e.Sig {
			e.Sig[j] = byte(r.Uint32())
		}
		var raw Raw
		if err := raw.view(encodeEvent(nil, e)); err != nil {
			t.Fatalf("event %d: view: %v", i, err)
		}
		if got, want := raw.AppendJSON(nil), e.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("event %d: AppendJSON\n got %s\nwant %s", i, got, want)
		}
		if raw.ID() != e.ID || raw.PubKey() != e.PubKey || raw.CreatedAt() != e.CreatedAt || raw.Kind() != e.Kind {
			t.Errorf("event %d: fields differ", i)
		}
		ge, gok := raw.expiration()
		we, wok := e.Expiration()
		if ge != we || gok != wok {
			t.Errorf("event %d: expiration %d %v, want %d %v", i, ge, gok, we, wok)
		}
		filters := []nostr.Filter{
			{},
			{IDs: [][32]byte{e.ID}},
			{IDs: [][32]byte{{1}}},
			{Authors: [][32]byte{e.PubKey}, Kinds: []int{e.Kind}},
			{Authors: [][32]byte{{1}}},
			{Kinds: []int{e.Kind + 1}},
			{Since: e.CreatedAt, Until: e.CreatedAt, HasUntil: true},
			{Since: e.CreatedAt + 1},
			{Until: e.CreatedAt - 1, HasUntil: true},
			{Tags: map[string][]string{"t": {"a"}}},
			{Tags: map[string][]string{"t": {"b"}}},
			{Tags: map[string][]string{"e": {""}}},
			{Tags: map[string][]string{"p": {`"x"`}, "expiration": {"1700000100"}}},
			{Tags: map[string][]string{"d": {"x"}}, Kinds: []int{30023}},
			{Search: "x"},
		}
		for k := range filters {
			if got, want := raw.matches(&filters[k]), filters[k].Matches(e); got != want {
				t.Errorf("event %d filter %d: matches %v, want %v", i, k, got, want)
			}
		}
		back, err := raw.Event()
		if err != nil || fmt.Sprint(back) != fmt.Sprint(e) {
			t.Errorf("event %d: Event() = %v, %v", i, back, err)
		}
	}
}

// FuzzRawView holds the view to decodeEvent: it accepts exactly the
// records decodeEvent accepts, and then writes the decoded event's JSON.
func FuzzRawView(f *testing.F) {
	for _, e := range rawSamples() {
		f.Add(encodeEvent(nil, e))
	}
	f.Add(make([]byte, 128))
	f.Add(append(make([]byte, 128), 1, 1, 1, 2, 1, 'e'))
	f.Fuzz(func(t *testing.T, b []byte) {
		var raw Raw
		var ev nostr.Event
		verr, derr := raw.view(b), decodeEvent(b, &ev)
		if (verr == nil) != (derr == nil) {
			t.Fatalf("view: %v, decodeEvent: %v", verr, derr)
		}
		if verr != nil {
			return
		}
		if got, want := raw.AppendJSON(nil), ev.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
		}
		ge, gok := raw.expiration()
		we, wok := ev.Expiration()
		if ge != we || gok != wok {
			t.Fatalf("expiration %d %v, want %d %v", ge, gok, we, wok)
		}
	})
}
