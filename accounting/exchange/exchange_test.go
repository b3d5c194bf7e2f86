package exchange

import (
	"encoding/json"
	"testing"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
)

func keys(t testing.TB) (*identity.Key, *identity.Key) {
	t.Helper()
	p, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return p, r
}

// signed is the responder's sign body for a proposal of mine at seq 1.
func signed(t testing.TB, proposer, responder *identity.Key, mine, theirs receipt.Side) []byte {
	t.Helper()
	body := Propose(nil, 3600, 3600, mine, 1)
	r := Build(proposer.DID(), responder.DID(), body, theirs)
	if err := r.Sign(responder); err != nil {
		t.Fatal(err)
	}
	raw, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ReceiptBody{Receipt: raw})
	return b
}

// The proposer accepts the responder's signature over its own figures,
// whichever way the DIDs sort, and refuses one over figures it does not
// hold.
func TestCheckSigned(t *testing.T) {
	p, r := keys(t)
	mine := receipt.Side{Received: receipt.Counts{MediationMessages: 7}}
	theirs := receipt.Side{Gave: receipt.Counts{MediationMessages: 7}}
	holds := func(int64) (receipt.Side, bool) { return mine, true }
	for _, pair := range [][2]*identity.Key{{p, r}, {r, p}} {
		prop, resp := pair[0], pair[1]
		raw := signed(t, prop, resp, mine, theirs)
		got, err := CheckSigned(raw, prop.DID(), resp.DID(), nil, 3600, holds)
		if err != nil {
			t.Fatal(err)
		}
		if got.Side(prop.DID()) != mine || got.Side(resp.DID()) != theirs {
			t.Fatalf("figures in the wrong places: %+v", got)
		}
		other := func(int64) (receipt.Side, bool) { return theirs, true }
		if _, err := CheckSigned(raw, prop.DID(), resp.DID(), nil, 3600, other); err == nil {
			t.Fatal("accepted a receipt with figures the proposer does not hold")
		}
		if _, err := CheckSigned(raw, resp.DID(), prop.DID(), nil, 3600, holds); err == nil {
			t.Fatal("accepted a receipt signed by the proposer as the responder's")
		}
	}
	if why := Agree(receipt.Side{Gave: receipt.Counts{Events: 100}}, receipt.Side{Received: receipt.Counts{Events: 90}}, 0.02, 2); why == "" {
		t.Fatal("100 against 90 events agreed at 2% and slack 2")
	}
}

// FuzzCheckSigned feeds arbitrary sign bodies to the proposer's check: it
// never panics, and whatever it accepts carries the responder's valid
// signature, the proposer's figures and no proposer signature.
func FuzzCheckSigned(f *testing.F) {
	p, r := keys(f)
	mine := receipt.Side{Received: receipt.Counts{MediationMessages: 3}}
	f.Add(signed(f, p, r, mine, receipt.Side{Gave: receipt.Counts{MediationMessages: 3}}))
	f.Add([]byte(`{"receipt":"oWF2AQ"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := CheckSigned(body, p.DID(), r.DID(), nil, 3600, func(int64) (receipt.Side, bool) { return mine, true })
		if err != nil {
			return
		}
		if err := VerifySigner(got, r.DID()); err != nil {
			t.Fatalf("accepted without the responder's signature: %v", err)
		}
		if got.Side(p.DID()) != mine || got.Seq != 1 || got.Disputed {
			t.Fatalf("accepted %+v", got)
		}
		if (p.DID() == got.A && got.SigA != nil) || (p.DID() == got.B && got.SigB != nil) {
			t.Fatal("accepted a receipt the proposer already signed")
		}
	})
}

// TestAgree is the agreement rule service by service: within the larger
// of the tolerance and the slack, with bytes' slack at the mean event
// size and circuit bytes' at CircuitSlackBytes a unit.
func TestAgree(t *testing.T) {
	gave := func(c receipt.Counts) receipt.Side { return receipt.Side{Gave: c} }
	got := func(c receipt.Counts) receipt.Side { return receipt.Side{Received: c} }
	for _, c := range []struct {
		name   string
		a, b   receipt.Counts
		agrees bool
	}{
		{"equal", receipt.Counts{Events: 10, Bytes: 3000}, receipt.Counts{Events: 10, Bytes: 3000}, true},
		{"two events in flight", receipt.Counts{Events: 10, Bytes: 3000}, receipt.Counts{Events: 8, Bytes: 2400}, true},
		{"three events", receipt.Counts{Events: 10, Bytes: 3000}, receipt.Counts{Events: 7, Bytes: 2100}, false},
		{"2% of many events", receipt.Counts{Events: 1000}, receipt.Counts{Events: 980}, true},
		{"storage off by 3 bytes", receipt.Counts{StorageBytes: 100}, receipt.Counts{StorageBytes: 97}, false},
		{"circuit negotiation", receipt.Counts{CircuitBytes: 44101}, receipt.Counts{CircuitBytes: 43330}, true},
		{"circuit bytes beyond slack and tolerance", receipt.Counts{CircuitBytes: 50000}, receipt.Counts{CircuitBytes: 46000}, false},
		{"circuit seconds", receipt.Counts{CircuitSeconds: 62}, receipt.Counts{CircuitSeconds: 60}, true},
		{"mediation", receipt.Counts{MediationMessages: 9}, receipt.Counts{MediationMessages: 5}, false},
	} {
		if why := Agree(gave(c.a), got(c.b), 0.02, 2); (why == "") != c.agrees {
			t.Errorf("%s: agrees %v (%s), want %v", c.name, why == "", why, c.agrees)
		}
	}
}
