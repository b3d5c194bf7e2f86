package exchange

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
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
	body := Propose(nil, 3600, 3600, mine, 1, DefaultBounds)
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
		got, err := CheckSigned(raw, prop.DID(), resp.DID(), nil, 3600, DefaultBounds, holds)
		if err != nil {
			t.Fatal(err)
		}
		if got.Side(prop.DID()) != mine || got.Side(resp.DID()) != theirs {
			t.Fatalf("figures in the wrong places: %+v", got)
		}
		other := func(int64) (receipt.Side, bool) { return theirs, true }
		if _, err := CheckSigned(raw, prop.DID(), resp.DID(), nil, 3600, DefaultBounds, other); err == nil {
			t.Fatal("accepted a receipt with figures the proposer does not hold")
		}
		if _, err := CheckSigned(raw, resp.DID(), prop.DID(), nil, 3600, DefaultBounds, holds); err == nil {
			t.Fatal("accepted a receipt signed by the proposer as the responder's")
		}
	}
	if why := Agree(receipt.Side{Gave: receipt.Counts{Events: 100}}, receipt.Side{Received: receipt.Counts{Events: 90}}, DefaultBounds); why == "" {
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
		got, err := CheckSigned(body, p.DID(), r.DID(), nil, 3600, DefaultBounds, func(int64) (receipt.Side, bool) { return mine, true })
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
		if why := Agree(gave(c.a), got(c.b), DefaultBounds); (why == "") != c.agrees {
			t.Errorf("%s: agrees %v (%s), want %v", c.name, why == "", why, c.agrees)
		}
	}
}

// A responder that signs its own figures outside the proposer's bounds
// (a home writing any "gave" into its leaf's receipt, or inflating what it
// says it received) gets a *Disagreement, never a receipt to countersign;
// within the bounds it is accepted.
func TestCheckSignedRefusesTheirFigures(t *testing.T) {
	p, r := keys(t)
	mine := receipt.Side{Gave: receipt.Counts{Events: 100, Bytes: 50_000}, Received: receipt.Counts{MediationMessages: 40}}
	holds := func(int64) (receipt.Side, bool) { return mine, true }
	honest := receipt.Side{Gave: receipt.Counts{MediationMessages: 40}, Received: receipt.Counts{Events: 100, Bytes: 50_000}}
	for _, c := range []struct {
		name   string
		theirs func(receipt.Side) receipt.Side
		ok     bool
	}{
		{"honest", func(s receipt.Side) receipt.Side { return s }, true},
		{"within the slack", func(s receipt.Side) receipt.Side { s.Received.Events -= 2; s.Received.Bytes -= 1000; return s }, true},
		{"home inflates what it gave", func(s receipt.Side) receipt.Side { s.Gave.MediationMessages = 4_000; return s }, false},
		{"home inflates what it gave by a little over the slack", func(s receipt.Side) receipt.Side { s.Gave.MediationMessages += 3; return s }, false},
		{"home inflates what it received", func(s receipt.Side) receipt.Side { s.Received.Bytes = 5_000_000; return s }, false},
		{"home invents a service", func(s receipt.Side) receipt.Side { s.Gave.StorageBytes = 1 << 30; return s }, false},
	} {
		for _, pair := range [][2]*identity.Key{{p, r}, {r, p}} {
			prop, resp := pair[0], pair[1]
			raw := signed(t, prop, resp, mine, c.theirs(honest))
			got, err := CheckSigned(raw, prop.DID(), resp.DID(), nil, 3600, DefaultBounds, holds)
			var d *Disagreement
			switch {
			case c.ok && err != nil:
				t.Errorf("%s: refused: %v", c.name, err)
			case !c.ok && !errors.As(err, &d):
				t.Errorf("%s: got %v, %v; want a disagreement", c.name, got, err)
			case !c.ok && (d.Theirs != c.theirs(honest) || d.Window != 3600):
				t.Errorf("%s: disagreement %+v", c.name, d)
			}
		}
	}
}

// The tolerance is a fraction of the checker's own figure, not of the
// larger (the other side's, when it inflates): 111 against the checker's
// 100 at 10% is outside, although 10% of 111 would cover it.
func TestAgreeToleranceFromOwnFigures(t *testing.T) {
	b := Bounds{Tolerance: 0.1}
	mine := receipt.Side{Gave: receipt.Counts{MediationMessages: 100}, Received: receipt.Counts{Events: 100}}
	for _, c := range []struct {
		name   string
		theirs receipt.Side
		agrees bool
	}{
		{"received 110 of 100 given", receipt.Side{Received: receipt.Counts{MediationMessages: 110}, Gave: receipt.Counts{Events: 100}}, true},
		{"received 111 of 100 given", receipt.Side{Received: receipt.Counts{MediationMessages: 111}, Gave: receipt.Counts{Events: 100}}, false},
		{"gave 111 of 100 received", receipt.Side{Received: receipt.Counts{MediationMessages: 100}, Gave: receipt.Counts{Events: 111}}, false},
		{"gave 90 of 100 received", receipt.Side{Received: receipt.Counts{MediationMessages: 100}, Gave: receipt.Counts{Events: 90}}, true},
	} {
		if why := Agree(mine, c.theirs, b); (why == "") != c.agrees {
			t.Errorf("%s: agrees %v (%s), want %v", c.name, why == "", why, c.agrees)
		}
	}
}

// Against a true zero (the checker counted no event in that direction)
// the slack is events of at most SlackEventBytes each, not any bytes the
// other side writes; with events counted, slack bytes are at the
// checker's own mean event size, however large the other side's mean.
func TestAgreeSlackAgainstZero(t *testing.T) {
	zero := receipt.Side{}
	for _, c := range []struct {
		name   string
		mine   receipt.Counts
		theirs receipt.Counts
		agrees bool
	}{
		{"one event in flight", receipt.Counts{}, receipt.Counts{Events: 1, Bytes: 700}, true},
		{"two largest events", receipt.Counts{}, receipt.Counts{Events: 2, Bytes: 2 * SlackEventBytes}, true},
		{"two events of a megabyte", receipt.Counts{}, receipt.Counts{Events: 2, Bytes: 2 << 20}, false},
		{"bytes with no events", receipt.Counts{}, receipt.Counts{Bytes: 3 * SlackEventBytes}, false},
		{"three events", receipt.Counts{}, receipt.Counts{Events: 3, Bytes: 300}, false},
		{"slack at this side's mean", receipt.Counts{Events: 10, Bytes: 1000}, receipt.Counts{Events: 12, Bytes: 1200}, true},
		{"slack events inflated past this side's mean", receipt.Counts{Events: 10, Bytes: 1000}, receipt.Counts{Events: 12, Bytes: 500_000}, false},
	} {
		mine, theirs := zero, zero
		mine.Received, theirs.Gave = c.mine, c.theirs
		if why := Agree(mine, theirs, DefaultBounds); (why == "") != c.agrees {
			t.Errorf("%s: agrees %v (%s), want %v", c.name, why == "", why, c.agrees)
		}
	}
}

// The responder signs only what the proposer's own check accepts: it
// checks from both sides' figures within the stricter of both bounds, so
// an honest responder with wider bounds never signs a receipt an honest
// proposer refuses.
func TestCheckProposal(t *testing.T) {
	mine := receipt.Side{Received: receipt.Counts{MediationMessages: 100}}
	for _, c := range []struct {
		name   string
		theirs uint64
		own    Bounds
		stated *Bounds
		signs  bool
	}{
		{"equal", 100, DefaultBounds, &DefaultBounds, true},
		{"within both", 102, DefaultBounds, &DefaultBounds, true},
		{"within the responder's wider bounds, not the proposer's", 108, Bounds{Tolerance: 0.1}, &Bounds{Tolerance: 0.02}, false},
		{"no stated bounds: the responder's own", 108, Bounds{Tolerance: 0.1}, nil, true},
		{"inside from the responder's figure, outside from the proposer's", 89, Bounds{Tolerance: 0.11}, &Bounds{Tolerance: 0.11}, false},
	} {
		body := ProposeBody{WindowStart: 3600, WindowSecs: 3600, Seq: 1, Round: 1, Counts: receipt.Side{Gave: receipt.Counts{MediationMessages: c.theirs}}, Bounds: c.stated}
		why := CheckProposal(body, mine, c.own)
		if (why == "") != c.signs {
			t.Errorf("%s: signs %v (%s), want %v", c.name, why == "", why, c.signs)
		}
		if c.signs && c.stated != nil && Agree(body.Counts, mine, *c.stated) != "" {
			t.Errorf("%s: signed what the proposer refuses", c.name)
		}
	}
}

// FuzzProposerAnswer feeds arbitrary answers to a proposal (a sign or a
// dispute open with any body) to the proposer's side: it never panics,
// stores only a receipt that both sides signed over the proposer's own
// figures, and reports every other answer as an error or a dispute.
func FuzzProposerAnswer(f *testing.F) {
	p, r := keys(f)
	mine := receipt.Side{Received: receipt.Counts{MediationMessages: 3}}
	f.Add(false, signed(f, p, r, mine, receipt.Side{Gave: receipt.Counts{MediationMessages: 3}}))
	f.Add(false, signed(f, p, r, mine, receipt.Side{Gave: receipt.Counts{MediationMessages: 300}}))
	f.Add(true, []byte(`{"window_start":3600,"counts":{"gave":{"events":1}},"round":1,"reason":"x","findings":["a","b"]}`))
	f.Add(true, []byte(`{"findings":null}`))
	f.Fuzz(func(t *testing.T, dispute bool, body []byte) {
		typ := TypeSign
		if dispute {
			typ = TypeDisputeOpen
		}
		var stored *receipt.Receipt
		pr := &Proposer{Key: p, Responder: r.DID(), Bounds: DefaultBounds,
			Send: func(context.Context, string, any) (*didcomm.Message, error) {
				return &didcomm.Message{Type: typ, Body: body}, nil
			},
			Mine:  func(int64) (receipt.Side, bool) { return mine, true },
			Store: func(rc *receipt.Receipt) error { stored = rc; return nil }}
		out, err := pr.Propose(context.Background(), nil, Window{Start: 3600, Secs: 3600, Mine: mine})
		switch {
		case err != nil:
			if stored != nil {
				t.Fatal("stored a receipt and failed")
			}
		case out.Receipt != nil:
			if stored != out.Receipt || out.Receipt.Verify() != nil || out.Receipt.Side(p.DID()) != mine {
				t.Fatalf("stored %+v", out.Receipt)
			}
			if Agree(mine, out.Receipt.Side(r.DID()), DefaultBounds) != "" {
				t.Fatal("stored a receipt whose other side disagrees")
			}
		case out.Dispute == nil:
			t.Fatal("neither a receipt, a dispute nor an error")
		case len(out.Dispute.Findings) > MaxFindings:
			t.Fatalf("%d findings kept", len(out.Dispute.Findings))
		}
	})
}
