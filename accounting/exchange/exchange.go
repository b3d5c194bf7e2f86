// Package exchange is the wire side of a window's receipt exchange
// (spec/receipts.md "The window close", spec/disputes.md): the receipt/1.0
// and dispute/1.0 message types and bodies, and the checks each side makes
// before it signs. It holds no state and opens no connection, so both a
// node's accounting (package accounting) and a leaf (package leaf, which
// has no libp2p host and must stay small enough to bind with gomobile)
// run the same protocol from it.
//
// The exchange has two roles. The proposer sends its figures and its head
// of the pair's chain; the responder compares them with its own, signs
// the receipt first and stores what it signed; the proposer checks that
// signature and its own figures, stores the receipt, and then sends its
// countersignature. Between nodes the proposer is the side whose DID sorts
// first (a); with a leaf it is always the leaf, whichever way the DIDs
// sort, because a home cannot reach a sleeping leaf.
//
// It is not the record format (package receipt) or the storage and window
// loop (package accounting, package leaf).
package exchange

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/ipfs/go-cid"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
)

// Protocol identifiers and message types (spec/receipts.md,
// spec/disputes.md).
const (
	PIURIReceipt    = "https://fleetmesh.org/protocols/receipt/1.0"
	TypePropose     = PIURIReceipt + "/propose"
	TypeSign        = PIURIReceipt + "/sign"
	TypeCountersign = PIURIReceipt + "/countersign"
	TypeAck         = PIURIReceipt + "/ack"
	TypeRequest     = PIURIReceipt + "/request"
	TypeForkProof   = PIURIReceipt + "/fork-proof"
	PIURIDispute    = "https://fleetmesh.org/protocols/dispute/1.0"
	TypeDisputeOpen = PIURIDispute + "/open"
)

// Problem codes of the receipt protocol.
const (
	CodeNotReady = "e.p.req.time.window-open"
	CodeChain    = "e.p.msg.receipt-chain"
	CodeInvalid  = "e.p.msg.receipt-invalid"
)

// ProposeBody proposes a window's receipt: the proposer's figures, the
// chain position and the proposer's latest receipt of the pair (so the
// responder catches up after a crash).
type ProposeBody struct {
	WindowStart int64        `json:"window_start"`
	WindowSecs  int64        `json:"window_secs"`
	Seq         uint64       `json:"seq"`
	Prev        []byte       `json:"prev"`
	Counts      receipt.Side `json:"counts"`
	Head        []byte       `json:"head,omitempty"`
	Round       int          `json:"round"`
	// Evidence is the proposer's evidence of its event figures
	// (spec/disputes.md "Evidence"), sent from the second round, once
	// the responder has disputed the window.
	Evidence *receipt.Evidence `json:"evidence,omitempty"`
}

// ReceiptBody carries one receipt (sign, countersign, fork-proof's
// receipts, disputed).
type ReceiptBody struct {
	Receipt []byte `json:"receipt"`
}

// DisputeBody opens a dispute: the sender's own figures for the window
// and what disagrees.
type DisputeBody struct {
	WindowStart int64        `json:"window_start"`
	Counts      receipt.Side `json:"counts"`
	Round       int          `json:"round"`
	Reason      string       `json:"reason"`
	// Evidence is the sender's evidence of its event figures, and
	// Findings what it found checking the other side's (CheckEvidence),
	// when it had them.
	Evidence *receipt.Evidence `json:"evidence,omitempty"`
	Findings []string          `json:"findings,omitempty"`
}

// MaxFindings bounds the findings a dispute carries and keeps.
const MaxFindings = 8

// CheckEvidence checks a peer's evidence (theirs) against this side's
// (mine) for one window, both ways: whether the events the peer counts as
// given are those this side counts as received (their digests), and which
// sampled events one side counts and the other does not. It returns what
// it found, worded from this side, at most MaxFindings lines.
func CheckEvidence(mine, theirs receipt.Evidence) []string {
	if err := theirs.Check(); err != nil {
		return []string{"the peer's evidence is refused: " + err.Error()}
	}
	var out []string
	one := func(what string, claimed, seen receipt.EventSet, claimer, seer string) {
		if claimed.Digest == seen.Digest && claimed.Events == seen.Events {
			out = append(out, fmt.Sprintf("%s: the same %d events at both ends (digests match)", what, claimed.Events))
			return
		}
		out = append(out, fmt.Sprintf("%s: %d events counted by %s, %d by %s; digests differ", what, claimed.Events, claimer, seen.Events, seer))
		if m := receipt.Missing(claimed, seen); len(m) > 0 {
			out = append(out, fmt.Sprintf("%s: %d sampled events counted by %s and not by %s: %s", what, len(m), claimer, seer, listKeys(m)))
		}
		if m := receipt.Missing(seen, claimed); len(m) > 0 {
			out = append(out, fmt.Sprintf("%s: %d sampled events counted by %s and not by %s: %s", what, len(m), seer, claimer, listKeys(m)))
		}
	}
	one("the peer gave, this node received", theirs.Gave, mine.Received, "the peer", "this node")
	one("this node gave, the peer received", theirs.Received, mine.Gave, "the peer", "this node")
	return out[:min(len(out), MaxFindings)]
}

// listKeys lists up to four event keys.
func listKeys(ks []string) string {
	if len(ks) > 4 {
		return strings.Join(ks[:4], " ") + fmt.Sprintf(" and %d more", len(ks)-4)
	}
	return strings.Join(ks, " ")
}

// RequestBody asks the proposer to propose a window.
type RequestBody struct {
	WindowStart int64 `json:"window_start"`
}

// Next is the chain position after head h (nil: the pair has none yet).
func Next(h *receipt.Receipt) (seq uint64, prev cid.Cid) {
	if h == nil {
		return 1, cid.Undef
	}
	c, _ := h.CID()
	return h.Seq + 1, c
}

// Propose is the proposal of one window after head h, with the proposer's
// figures mine, in dispute round round (1 for the first proposal).
func Propose(h *receipt.Receipt, start, secs int64, mine receipt.Side, round int) ProposeBody {
	body := ProposeBody{WindowStart: start, WindowSecs: secs, Counts: mine, Round: round}
	seq, prev := Next(h)
	body.Seq = seq
	if prev.Defined() {
		body.Prev = prev.Bytes()
		body.Head, _ = h.Encode()
	}
	return body
}

// Build is the responder's receipt for an accepted proposal: each side's
// figures go where the DID order puts them.
func Build(proposer, responder string, body ProposeBody, mine receipt.Side) *receipt.Receipt {
	a, b := receipt.Pair(proposer, responder)
	_, prev, _ := cid.CidFromBytes(body.Prev)
	ca, cb := body.Counts, mine
	if a != proposer {
		ca, cb = mine, body.Counts
	}
	return receipt.New(a, b, body.WindowStart, body.WindowSecs, body.Seq, prev, ca, cb)
}

// VerifySigner checks did's signature on r alone (the other side's may be
// missing).
func VerifySigner(r *receipt.Receipt, did string) error {
	cp := *r
	sig := cp.SigA
	if did == r.B {
		sig = cp.SigB
	}
	cp.SigA, cp.SigB = nil, nil
	b, err := cp.SigningBytes()
	if err != nil {
		return err
	}
	pub, err := identity.PublicKeyFromDID(did)
	if err != nil {
		return err
	}
	if !r.Has(did) || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, append([]byte(receipt.SignaturePrefix), b...), sig) {
		return fmt.Errorf("%s's signature does not verify", did)
	}
	return nil
}

// CheckSigned is the proposer's check of the responder's signed receipt
// (the body of a sign message) before it countersigns: the pair, a chain
// receipt the proposer has not signed, the responder's signature, the
// position after the proposer's head h, the window length secs, and the
// proposer's own figures for the receipt's window, exactly as mine
// returns them (false: it holds none). The window may be an older one than
// proposed: what a responder signed at a seq it signs again.
func CheckSigned(raw []byte, proposer, responder string, h *receipt.Receipt, secs int64, mine func(window int64) (receipt.Side, bool)) (*receipt.Receipt, error) {
	var rb ReceiptBody
	if err := json.Unmarshal(raw, &rb); err != nil {
		return nil, err
	}
	r, err := receipt.Decode(rb.Receipt)
	if err != nil {
		return nil, err
	}
	a, b := receipt.Pair(proposer, responder)
	own := r.SigA
	if proposer == r.B {
		own = r.SigB
	}
	if r.A != a || r.B != b || r.Disputed || own != nil {
		return nil, fmt.Errorf("signed receipt is for %s, disputed %v", r.PairKey(), r.Disputed)
	}
	if err := VerifySigner(r, responder); err != nil {
		return nil, err
	}
	wantSeq, wantPrev := Next(h)
	gotPrev, _ := r.PrevCID()
	if r.Seq != wantSeq || !gotPrev.Equals(wantPrev) {
		return nil, fmt.Errorf("%s signed seq %d after %s, %s's chain is at seq %d", responder, r.Seq, gotPrev, proposer, wantSeq-1)
	}
	if m, ok := mine(r.WindowStart); !ok || r.Side(proposer) != m || r.WindowSecs != secs {
		return nil, fmt.Errorf("%s signed window %d with figures for %s that it does not hold", responder, r.WindowStart, proposer)
	}
	return r, nil
}

// Disputed is the disputed receipt (spec/disputes.md) that the side
// holding key records for a window it could not agree on with peer: both
// sides' figures, the peer's as last heard (nil: never, zero), outside
// the chain, signed by key alone. It returns the receipt's canonical
// bytes.
func Disputed(key *identity.Key, peer string, start, secs int64, mine receipt.Side, theirs *receipt.Side) ([]byte, error) {
	a, b := receipt.Pair(key.DID(), peer)
	other := receipt.Side{}
	if theirs != nil {
		other = *theirs
	}
	ca, cb := mine, other
	if a != key.DID() {
		ca, cb = other, mine
	}
	r := receipt.New(a, b, start, secs, 0, cid.Undef, ca, cb)
	r.Disputed = true
	if err := r.Sign(key); err != nil {
		return nil, err
	}
	return r.Encode()
}

// PrevBytes is a CID's binary form, nil for cid.Undef (a proposal's and a
// receipt's prev for seq 1).
func PrevBytes(c cid.Cid) []byte {
	if !c.Defined() {
		return nil
	}
	return c.Bytes()
}

// SamePosition reports whether a proposal is at the chain position after
// head h.
func SamePosition(body ProposeBody, h *receipt.Receipt) bool {
	seq, prev := Next(h)
	return body.Seq == seq && bytes.Equal(body.Prev, PrevBytes(prev))
}

// CircuitSlackBytes is the circuit bytes one unit of slack allows: a
// circuit or reservation stream's protocol negotiation, which one side
// counts and the other does not see (spec/receipts.md "Counts").
const CircuitSlackBytes = 1024

// Agree compares a's and b's figures for one window: what a gave against
// what b received and the other way round, service by service, within the
// tolerance (a fraction of the larger figure) or the slack (units: events,
// their bytes at the window's mean event size, and CircuitSlackBytes of
// circuit bytes), whichever allows more. It returns "" or what disagrees.
func Agree(a, b receipt.Side, tol float64, slack uint64) string {
	cmp := func(what string, x, y receipt.Counts) string {
		fx, fy := x.Fields(), y.Fields()
		events := max(x.Events, y.Events)
		for i := range fx {
			hi := max(fx[i].Value, fy[i].Value)
			diff := hi - min(fx[i].Value, fy[i].Value)
			allowed := slack
			switch {
			case fx[i].Name == "bytes" && events > 0:
				allowed = slack * ((hi + events - 1) / events)
			case fx[i].Name == "circuit_bytes":
				allowed = slack * CircuitSlackBytes
			}
			if float64(diff) > max(math.Floor(tol*float64(hi)), float64(allowed)) {
				return fmt.Sprintf("%s %s: %d against %d", what, fx[i].Name, fx[i].Value, fy[i].Value)
			}
		}
		return ""
	}
	if d := cmp("a gave / b received", a.Gave, b.Received); d != "" {
		return d
	}
	return cmp("b gave / a received", b.Gave, a.Received)
}
