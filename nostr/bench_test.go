package nostr

import (
	"strings"
	"testing"
)

// benchEvent is a typical kind-1 note: a few tags, a short reply text.
func benchEvent(b *testing.B) *Event {
	b.Helper()
	k, err := GenerateSecretKey()
	if err != nil {
		b.Fatal(err)
	}
	e := &Event{
		CreatedAt: 1700000000,
		Kind:      1,
		Tags: Tags{
			{"e", strings.Repeat("ab", 32), "wss://relay.example.org", "root"},
			{"p", strings.Repeat("cd", 32)},
			{"t", "nostr"},
		},
		Content: "GM! Here is a short note with a \"quote\", a newline\nand some ünïcödé, like most notes carry.",
	}
	if err := k.Sign(e); err != nil {
		b.Fatal(err)
	}
	return e
}

func BenchmarkParseClientMessageEvent(b *testing.B) {
	e := benchEvent(b)
	msg := []byte(`["EVENT",` + string(e.AppendJSON(nil)) + `]`)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseClientMessage(msg)
		if err != nil || m.Event.ID != e.ID {
			b.Fatalf("parse: %v", err)
		}
	}
}

func BenchmarkParseClientMessageReq(b *testing.B) {
	msg := []byte(`["REQ","sub1",{"authors":["` + strings.Repeat("ab", 32) + `","` + strings.Repeat("cd", 32) + `"],"kinds":[1,6,7],"limit":20},{"#p":["` + strings.Repeat("ef", 32) + `"],"since":1700000000}]`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseClientMessage(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	e := benchEvent(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkComputeID(b *testing.B) {
	e := benchEvent(b)
	b.ReportAllocs()
	for b.Loop() {
		if e.ComputeID() != e.ID {
			b.Fatal("id changed")
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	e := benchEvent(b)
	buf := e.AppendJSON(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = e.AppendJSON(buf[:0])
	}
}

// BenchmarkVerifierCached is Verify for an author whose key the Verifier
// already holds, the common case on a client connection.
func BenchmarkVerifierCached(b *testing.B) {
	e := benchEvent(b)
	v := NewVerifier(16)
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRelayMessageEvent(b *testing.B) {
	e := benchEvent(b)
	msg := []byte(`["EVENT","sub1",` + string(e.AppendJSON(nil)) + `]`)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseRelayMessage(msg)
		if err != nil || m.Event.ID != e.ID {
			b.Fatalf("parse: %v", err)
		}
	}
}

func BenchmarkAppendOK(b *testing.B) {
	m := RelayMessage{Type: MsgOK, EventID: benchEvent(b).ID, OK: true}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf = m.AppendJSON(buf[:0])
	}
}
