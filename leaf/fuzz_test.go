package leaf

import (
	"bytes"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/invite"
)

// fuzzLeaf is a leaf in a fresh directory, paired with an invitation
// nobody answers (fuzzing never dials).
func fuzzLeaf(f *testing.F) *Leaf {
	f.Helper()
	dir := f.TempDir()
	l, err := New(NewConfig(dir), &memKeys{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	return l
}

// FuzzPublish: any bytes are an event or a clear error, never a panic,
// and only a valid event enters the outbox.
func FuzzPublish(f *testing.F) {
	for _, ev := range signedEvents(f, 2, time.Now().Unix(), 2) {
		f.Add(ev.AppendJSON(nil))
	}
	f.Add([]byte(`{"id":"00","kind":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{0xff, 0x00})
	l := fuzzLeaf(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		err := l.Publish(b)
		if err == nil {
			if _, cerr := l.checkEvent(b); cerr != nil {
				t.Fatalf("Publish took an event checkEvent refuses: %v", cerr)
			}
		}
	})
}

// FuzzSendMessage: any plaintext bytes are queued or refused clearly.
func FuzzSendMessage(f *testing.F) {
	f.Add([]byte(`{"type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":"hi"}}`))
	f.Add([]byte(`{"id":"1","type":"t","body":[]}`))
	f.Add([]byte(`{"type":""}`))
	f.Add([]byte(`null`))
	l := fuzzLeaf(f)
	k, err := identity.GenerateKey()
	if err != nil {
		f.Fatal(err)
	}
	to := k.DID()
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = l.SendMessage(to, b) // no home: refused, but after parsing
	})
}

// FuzzPair: invitation strings (join code, URL or JSON) never panic.
func FuzzPair(f *testing.F) {
	f.Add(`https://example.org/didcomm?_oob=eyJpZCI6IjEiLCJ0eXBlIjoiaHR0cHM6Ly9kaWRjb21tLm9yZy9vdXQtb2YtYmFuZC8yLjAvaW52aXRhdGlvbiJ9`)
	f.Add(`{"id":"1","type":"https://didcomm.org/out-of-band/2.0/invitation","from":"did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp","body":{"accept":["didcomm/v2"],"services":[{"id":"x","type":"DIDCommMessaging","serviceEndpoint":{"uri":"http://127.0.0.1:1/didcomm"}}]}}`)
	f.Add(`not a url`)
	k, err := identity.KeyFromSeed(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		f.Fatal(err)
	}
	code, err := invite.New(k, []string{"/ip4/192.0.2.7/tcp/4001"}, "http://192.0.2.7:7447/didcomm", time.Now().Add(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(code)
	f.Add(invite.Link(code))
	l := fuzzLeaf(f)
	f.Fuzz(func(t *testing.T, s string) {
		_ = l.Pair(s)
	})
}

// FuzzSubscribe: filter strings never panic; an accepted one is stored
// in a form that parses again.
func FuzzSubscribe(f *testing.F) {
	f.Add(`{"kinds":[1],"authors":["` + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798" + `"]}`)
	f.Add(`{"#e":["00"],"since":5,"limit":3}`)
	f.Add(`{"search":"x"}`)
	f.Add(`[`)
	l := fuzzLeaf(f)
	f.Fuzz(func(t *testing.T, s string) {
		if err := l.Subscribe(s); err != nil {
			return
		}
		canon, err := canonicalFilter(s)
		if err != nil {
			t.Fatalf("accepted filter does not canonicalize: %v", err)
		}
		if _, err := parseFilter(canon); err != nil {
			t.Fatalf("stored filter %s does not parse again: %v", canon, err)
		}
		_ = l.Unsubscribe(s)
	})
}
