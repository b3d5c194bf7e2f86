package label

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
)

const t0 = 1_800_000_000

// nodeKey is the node key numbered i, from a fixed seed.
func nodeKey(t testing.TB, i int) *identity.Key {
	k, err := identity.KeyFromSeed(bytes.Repeat([]byte{byte(i), byte(i >> 8), 7}, 11)[:32])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// nostrKey is the Nostr key numbered i.
func nostrKey(t testing.TB, i int) nostr.SecretKey {
	b := bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(i >> 16), 9}, 8)
	sk, err := nostr.SecretKeyFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

func hexOf(b [32]byte) string { return hex.EncodeToString(b[:]) }

// disputed is a disputed receipt of the window at t0 between by and
// other, signed by by alone.
func disputed(t testing.TB, by, other *identity.Key) *receipt.Receipt {
	a, b := receipt.Pair(by.DID(), other.DID())
	r := receipt.New(a, b, t0/3600*3600, 3600, 0, cid.Undef,
		receipt.Side{Gave: receipt.Counts{Events: 5, Bytes: 500}}, receipt.Side{Received: receipt.Counts{Events: 1, Bytes: 100}})
	r.Disputed = true
	if err := r.Sign(by); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRoundTrip: every kind of label a node makes parses back to what
// was put in, and verifies.
func TestRoundTrip(t *testing.T) {
	k, other, sk := nodeKey(t, 1), nodeKey(t, 2), nostrKey(t, 1)
	author := hexOf(nostrKey(t, 5).PubKey())
	d := disputed(t, k, other)
	for _, tc := range []struct {
		name    string
		reason  Reason
		target  Target
		note    string
		expires int64
		dispute *receipt.Receipt
	}{
		{"author", Spam, Target{Author, author}, "floods kind 1", 0, nil},
		{"event", Illegal, Target{Event, strings.Repeat("ab", 32)}, "", t0 + 3600, nil},
		{"blob", Malware, Target{Blob, strings.Repeat("cd", 32)}, "a trojan", 0, nil},
		{"node", Misbehaving, Target{Node, other.DID()}, "figures far off", t0 + 86400, d},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := New(k, sk, tc.reason, tc.target, tc.note, t0, tc.expires, tc.dispute)
			if err != nil {
				t.Fatal(err)
			}
			if !ev.CheckID() {
				t.Fatal("event id does not match")
			}
			if err := nostr.NewVerifier(4).Verify(ev); err != nil {
				t.Fatalf("nostr signature: %v", err)
			}
			// Through JSON, as a relay and a client see it.
			var back nostr.Event
			if err := back.UnmarshalJSON(ev.AppendJSON(nil)); err != nil {
				t.Fatal(err)
			}
			l, err := Parse(&back)
			if err != nil {
				t.Fatal(err)
			}
			if l.Labeller != k.DID() || l.Reason != tc.reason || l.Target != tc.target || l.Note != tc.note ||
				l.Created != t0 || l.Expires != tc.expires || l.ID != ev.ID || l.PubKey != sk.PubKey() {
				t.Fatalf("parsed %+v", l)
			}
			if (l.Dispute != nil) != (tc.dispute != nil) {
				t.Fatalf("dispute %v, want %v", l.Dispute != nil, tc.dispute != nil)
			}
			if got, _ := ev.Expiration(); got != tc.expires {
				t.Fatalf("NIP-40 expiration %d, want %d", got, tc.expires)
			}
		})
	}
}

// resign re-signs ev's Nostr signature after a test changed it, so that
// only the label's own checks can refuse it.
func resign(t *testing.T, ev *nostr.Event, sk nostr.SecretKey) *nostr.Event {
	t.Helper()
	if err := sk.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestParseRefuses: each broken label is refused with the error it
// deserves, and another namespace's label is not ours (not an error to
// the relay).
func TestParseRefuses(t *testing.T) {
	k, other, third, sk := nodeKey(t, 1), nodeKey(t, 2), nodeKey(t, 3), nostrKey(t, 1)
	author := hexOf(nostrKey(t, 5).PubKey())
	fresh := func(t *testing.T) *nostr.Event {
		ev, err := New(k, sk, Spam, Target{Author, author}, "note", t0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	nodeLabel := func(t *testing.T, d *receipt.Receipt, target *identity.Key) *nostr.Event {
		ev := &nostr.Event{CreatedAt: t0, Kind: Kind, PubKey: sk.PubKey(), Tags: nostr.Tags{{"L", Namespace}, {"l", "misbehaving", Namespace}, {"r", target.DID()}}}
		if d != nil {
			c, _ := d.CID()
			raw, _ := d.Encode()
			ev.Tags = append(ev.Tags, []string{"dispute", c.String(), base64.RawURLEncoding.EncodeToString(raw)})
		}
		ev.Tags = append(ev.Tags, []string{"did", k.DID(), ""})
		ev.Tags[len(ev.Tags)-1][2] = base64.RawURLEncoding.EncodeToString(k.Sign(signingBytes(ev)))
		return resign(t, ev, sk)
	}
	for _, tc := range []struct {
		name string
		ev   func(t *testing.T) *nostr.Event
		want error
	}{
		{"other namespace", func(t *testing.T) *nostr.Event {
			return resign(t, &nostr.Event{Kind: Kind, Tags: nostr.Tags{{"L", "ugc"}, {"l", "spam", "ugc"}, {"p", author}}}, sk)
		}, ErrNotLabel},
		{"no namespace", func(t *testing.T) *nostr.Event {
			return resign(t, &nostr.Event{Kind: Kind, Tags: nostr.Tags{{"p", author}}}, sk)
		}, ErrNotLabel},
		{"other kind", func(t *testing.T) *nostr.Event { ev := fresh(t); ev.Kind = 1; return resign(t, ev, sk) }, ErrNotLabel},
		{"note changed", func(t *testing.T) *nostr.Event { ev := fresh(t); ev.Content = "other"; return resign(t, ev, sk) }, ErrSignature},
		{"another nostr key", func(t *testing.T) *nostr.Event { return resign(t, fresh(t), nostrKey(t, 2)) }, ErrSignature},
		{"time changed", func(t *testing.T) *nostr.Event { ev := fresh(t); ev.CreatedAt++; return resign(t, ev, sk) }, ErrSignature},
		{"did swapped", func(t *testing.T) *nostr.Event {
			ev := fresh(t)
			ev.Tags[len(ev.Tags)-1][1] = other.DID()
			return resign(t, ev, sk)
		}, ErrSignature},
		{"unknown reason", func(t *testing.T) *nostr.Event {
			ev := fresh(t)
			ev.Tags[1][1] = "boring"
			return resign(t, ev, sk)
		}, ErrMalformed},
		{"two targets", func(t *testing.T) *nostr.Event {
			ev := fresh(t)
			ev.Tags = slices.Insert(ev.Tags, 3, []string{"e", strings.Repeat("ab", 32)})
			return resign(t, ev, sk)
		}, ErrMalformed},
		{"upper-case hex", func(t *testing.T) *nostr.Event {
			ev := fresh(t)
			ev.Tags[2][1] = strings.ToUpper(author)
			return resign(t, ev, sk)
		}, ErrMalformed},
		{"did not last", func(t *testing.T) *nostr.Event {
			ev := fresh(t)
			ev.Tags = append(ev.Tags, []string{"expiration", "1900000000"})
			return resign(t, ev, sk)
		}, ErrMalformed},
		{"unknown tag", func(t *testing.T) *nostr.Event {
			ev := fresh(t)
			ev.Tags = slices.Insert(ev.Tags, 0, []string{"t", "x"})
			return resign(t, ev, sk)
		}, ErrMalformed},
		{"note too long", func(t *testing.T) *nostr.Event {
			ev := fresh(t)
			ev.Content = strings.Repeat("x", MaxNoteBytes+1)
			return resign(t, ev, sk)
		}, ErrMalformed},
		{"node without dispute", func(t *testing.T) *nostr.Event { return nodeLabel(t, nil, other) }, ErrMalformed},
		{"dispute of another pair", func(t *testing.T) *nostr.Event { return nodeLabel(t, disputed(t, k, third), other) }, ErrMalformed},
		{"dispute signed by the other side", func(t *testing.T) *nostr.Event { return nodeLabel(t, disputed(t, other, k), other) }, ErrMalformed},
		{"author labelled misbehaving", func(t *testing.T) *nostr.Event {
			ev := fresh(t)
			ev.Tags[1][1] = "misbehaving"
			return resign(t, ev, sk)
		}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.ev(t))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	// And the control: a node label with its own dispute parses.
	if _, err := Parse(nodeLabel(t, disputed(t, k, other), other)); err != nil {
		t.Fatalf("a good node label: %v", err)
	}
}

// TestRetract: a deletion names the labels; it retracts only those its
// own key published.
func TestRetract(t *testing.T) {
	k, sk := nodeKey(t, 1), nostrKey(t, 1)
	ev, err := New(k, sk, Spam, Target{Author, hexOf(nostrKey(t, 5).PubKey())}, "", t0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := Parse(ev)
	s := NewSet(10, 10)
	s.Add(l, true)
	other, _ := Retract(nostrKey(t, 2), t0+1, ev.ID)
	if n := s.Retract(other.PubKey, Retracted(other)); n != 0 {
		t.Fatalf("another key's deletion retracted %d", n)
	}
	del, err := Retract(sk, t0+1, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := Retracted(del); len(got) != 1 || got[0] != ev.ID {
		t.Fatalf("retracted %v", got)
	}
	if n := s.Retract(del.PubKey, Retracted(del)); n != 1 || s.Has(ev.ID) {
		t.Fatalf("retracted %d, still held %v", n, s.Has(ev.ID))
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
