package label

import (
	"errors"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

// FuzzParse feeds event JSON to the label decoder. Whatever it accepts
// must hold to the form spec/labels.md gives (a reason of the vocabulary,
// one well-formed target, a labeller's did:key, a bounded note, a
// dispute exactly on a node label, signed by the labeller), and every
// refusal must be one of the decoder's errors.
func FuzzParse(f *testing.F) {
	k, other, sk := nodeKey(f, 1), nodeKey(f, 2), nostrKey(f, 1)
	author := hexOf(nostrKey(f, 5).PubKey())
	for _, mk := range []func() (*nostr.Event, error){
		func() (*nostr.Event, error) { return New(k, sk, Spam, Target{Author, author}, "note", t0, 0, nil) },
		func() (*nostr.Event, error) {
			return New(k, sk, Illegal, Target{Event, strings.Repeat("ab", 32)}, "", t0, t0+60, nil)
		},
		func() (*nostr.Event, error) {
			return New(k, sk, Malware, Target{Blob, strings.Repeat("cd", 32)}, "x", t0, 0, nil)
		},
		func() (*nostr.Event, error) {
			return New(k, sk, Misbehaving, Target{Node, other.DID()}, "", t0, 0, disputed(f, k, other))
		},
	} {
		ev, err := mk()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(ev.AppendJSON(nil))
	}
	f.Add([]byte(`{"kind":1985,"tags":[["L","org.fleetmesh.label"]],"content":""}`))
	f.Add([]byte(`{"kind":1985,"tags":[["L","ugc"],["l","spam","ugc"]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev nostr.Event
		if ev.UnmarshalJSON(data) != nil {
			return
		}
		l, err := Parse(&ev)
		if err != nil {
			if l != nil {
				t.Fatal("a label and an error both returned")
			}
			if !errors.Is(err, ErrNotLabel) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrSignature) {
				t.Fatalf("error %v is none of the decoder's", err)
			}
			return
		}
		if _, err := ParseReason(string(l.Reason)); err != nil {
			t.Fatalf("reason %q accepted", l.Reason)
		}
		if err := l.Target.Check(); err != nil {
			t.Fatalf("target accepted: %v", err)
		}
		if len(l.Note) > MaxNoteBytes {
			t.Fatalf("note of %d bytes accepted", len(l.Note))
		}
		if (l.Target.Kind == Node) != (l.Dispute != nil) {
			t.Fatal("a dispute off a node label, or a node label without one")
		}
		if l.Dispute != nil && (!l.Dispute.Has(l.Labeller) || !l.Dispute.Has(l.Target.Value) || l.Dispute.Verify() != nil) {
			t.Fatal("a dispute not between the labeller and its node accepted")
		}
	})
}
