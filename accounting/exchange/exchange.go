// Package exchange is the wire side of a window's receipt exchange
// (spec/receipts.md "The window close", spec/disputes.md): the receipt/1.0
// and dispute/1.0 message types and bodies, the checks each side makes
// before it signs (Agree, CheckProposal, CheckSigned), and the proposer's
// side of one window's exchange with its dispute rounds (Proposer). It
// holds no state and opens no connection (the caller hands in how to
// send and store), so both a node's accounting (package accounting) and
// a leaf (package leaf, which has no libp2p host and must stay small
// enough to bind with gomobile) run the one exchange from it, and a fix
// lands once.
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
	// Bounds are the proposer's bounds (CheckSigned): the responder
	// signs only within the stricter of its own and these
	// (CheckProposal). Absent, the responder's own.
	Bounds *Bounds `json:"bounds,omitempty"`
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
// figures mine and bounds, in dispute round round (1 for the first
// proposal).
func Propose(h *receipt.Receipt, start, secs int64, mine receipt.Side, round int, bounds Bounds) ProposeBody {
	body := ProposeBody{WindowStart: start, WindowSecs: secs, Counts: mine, Round: round, Bounds: &bounds}
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

// Disagreement is the error of a check that found the other side's
// figures outside the checker's bounds: a dispute of the window, never a
// signature.
type Disagreement struct {
	// Window is the disputed window's start.
	Window int64
	// Theirs is the other side's figures as it signed or proposed them.
	Theirs receipt.Side
	// Reason says which figure disagrees.
	Reason string
}

func (d *Disagreement) Error() string {
	return fmt.Sprintf("window %d: the other side's figures disagree with this side's meter: %s", d.Window, d.Reason)
}

// CheckSigned is the proposer's check of the responder's signed receipt
// (the body of a sign message) before it countersigns: the pair, a chain
// receipt the proposer has not signed, the responder's signature, the
// position after the proposer's head h, the window length secs, the
// proposer's own figures for the receipt's window, exactly as mine
// returns them (false: it holds none), and the responder's figures
// against the proposer's within the proposer's bounds (Agree). The window
// may be an older one than proposed: what a responder signed at a seq it
// signs again. Figures outside the bounds return a *Disagreement.
func CheckSigned(raw []byte, proposer, responder string, h *receipt.Receipt, secs int64, bounds Bounds, mine func(window int64) (receipt.Side, bool)) (*receipt.Receipt, error) {
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
	m, ok := mine(r.WindowStart)
	if !ok || r.Side(proposer) != m || r.WindowSecs != secs {
		return nil, fmt.Errorf("%s signed window %d with figures for %s that it does not hold", responder, r.WindowStart, proposer)
	}
	if why := Agree(m, r.Side(responder), bounds); why != "" {
		return nil, &Disagreement{Window: r.WindowStart, Theirs: r.Side(responder), Reason: why}
	}
	return r, nil
}

// CheckProposal is the responder's check of a proposal against its own
// figures mine before it signs: the proposer's figures within the stricter
// of the responder's bounds own and those the proposal states, measured
// both from the responder's figures and from the proposer's, so that an
// honest responder never signs a receipt the proposer's own check
// (CheckSigned) refuses. It returns "" or what disagrees.
func CheckProposal(body ProposeBody, mine receipt.Side, own Bounds) string {
	b := own
	if body.Bounds != nil {
		b = b.Stricter(*body.Bounds)
	}
	if why := Agree(mine, body.Counts, b); why != "" {
		return why
	}
	if why := Agree(body.Counts, mine, b); why != "" {
		return "measured from the proposer's figures: " + why
	}
	return ""
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

// SlackEventBytes bounds the bytes one unit of slack allows for an event
// the checker did not count at all in that direction (its count is zero,
// so it has no mean event size): the largest event a relay accepts by
// default (max_event_bytes, spec/limits.md). Against a true zero the slack
// is a few events of at most this size, never any bytes the other side
// writes.
const SlackEventBytes = 65536

// Bounds are how far a checker lets the other side's figures differ from
// its own and still sign: Tolerance, a fraction of the checker's own
// figure, or Slack units, whichever allows more (Agree).
type Bounds struct {
	Tolerance float64 `json:"tolerance"`
	Slack     uint64  `json:"slack"`
}

// DefaultBounds are a node's default `[accounting] tolerance` and `slack`,
// and a leaf's bounds.
var DefaultBounds = Bounds{Tolerance: 0.02, Slack: 2}

// Stricter is the smaller tolerance and slack of b and o.
func (b Bounds) Stricter(o Bounds) Bounds {
	return Bounds{Tolerance: min(b.Tolerance, max(o.Tolerance, 0)), Slack: min(b.Slack, o.Slack)}
}

// Agree checks the other side's figures theirs against the checker's own,
// mine, for one window: what the checker gave against what the other
// received and the other way round, service by service, within the
// bounds computed from the checker's own figures alone: the tolerance is
// a fraction of the checker's figure, and a unit of slack is an event,
// its bytes at the checker's mean event size in that direction (at most
// SlackEventBytes, and SlackEventBytes when the checker counted no event),
// or CircuitSlackBytes of circuit bytes. Nothing the other side writes
// widens the bounds. It returns "" or what disagrees.
func Agree(mine, theirs receipt.Side, b Bounds) string {
	cmp := func(what string, own, other receipt.Counts) string {
		fo, ft := own.Fields(), other.Fields()
		for i := range fo {
			x, y := fo[i].Value, ft[i].Value
			diff := max(x, y) - min(x, y)
			allowed := b.Slack
			switch fo[i].Name {
			case "bytes":
				per := uint64(SlackEventBytes)
				if own.Events > 0 {
					per = min(per, (own.Bytes+own.Events-1)/own.Events)
				}
				allowed = b.Slack * per
			case "circuit_bytes":
				allowed = b.Slack * CircuitSlackBytes
			}
			if float64(diff) > max(math.Floor(b.Tolerance*float64(x)), float64(allowed)) {
				return fmt.Sprintf("%s %s: %d here against %d", what, fo[i].Name, x, y)
			}
		}
		return ""
	}
	if d := cmp("this side gave / the other received", mine.Gave, theirs.Received); d != "" {
		return d
	}
	return cmp("the other gave / this side received", mine.Received, theirs.Gave)
}
