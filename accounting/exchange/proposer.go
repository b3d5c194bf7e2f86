package exchange

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
)

// Send sends one message of the exchange (its type and body) to the
// responder and returns the responder's answer: a node's agent, or a
// leaf's mediator client. A problem report comes back as a
// *didcomm.Problem.
type Send func(ctx context.Context, typ string, body any) (*didcomm.Message, error)

// Proposer runs the proposer's side of the window exchange with one
// responder, the same for a node (package accounting) and a leaf (package
// leaf): each keeps its own records and hands them in as functions.
type Proposer struct {
	// Key signs the proposer's receipts.
	Key *identity.Key
	// Responder is the other side's DID.
	Responder string
	// Bounds are the proposer's bounds on the responder's figures
	// (Agree), stated in each proposal.
	Bounds Bounds
	// Send reaches the responder.
	Send Send
	// Mine returns the proposer's own figures for a window exactly as it
	// saved them (false: it holds none): CheckSigned's.
	Mine func(window int64) (receipt.Side, bool)
	// Store stores a complete receipt, durably, before its
	// countersignature is sent.
	Store func(*receipt.Receipt) error
}

// Window is a closed window as the proposer holds it: its figures and the
// state of its exchange.
type Window struct {
	Start, Secs int64
	Mine        receipt.Side
	// Rounds is how many proposals of the window were answered; from
	// the second proposal on, Evidence (the proposer's, if it keeps any)
	// goes with it.
	Rounds   int
	Evidence *receipt.Evidence
}

// Outcome is what one proposal came to.
type Outcome struct {
	// Receipt is the co-signed receipt, stored (Proposer.Store) and not
	// yet countersigned to the responder (Countersign); nil when the
	// window is in dispute.
	Receipt *receipt.Receipt
	// Round is the proposal's round: the window's Rounds from now on.
	Round int
	// Dispute, when the window is in dispute after this round, is the
	// responder's open message or, when the proposer refused the
	// figures the responder signed, those figures with the reason.
	Dispute *DisputeBody
	// Refused is set when the proposer refused the responder's
	// signature (a *Disagreement): the proposer told the responder
	// (dispute/1.0 open), best effort.
	Refused bool
}

// Propose proposes window w after the pair's head h (nil: none yet), and
// either checks the responder's signed receipt (CheckSigned: both sides
// against the proposer's meter), signs it and stores it, or records the
// dispute round: the responder's open, or the proposer's refusal of what
// the responder signed, which is a dispute, never a signature. A problem
// the responder answered with comes back as its *didcomm.Problem.
func (p *Proposer) Propose(ctx context.Context, h *receipt.Receipt, w Window) (Outcome, error) {
	body := Propose(h, w.Start, w.Secs, w.Mine, w.Rounds+1, p.Bounds)
	if w.Rounds > 0 {
		body.Evidence = w.Evidence // the window is disputed: show the evidence
	}
	reply, err := p.Send(ctx, TypePropose, body)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Round: body.Round}
	switch reply.Type {
	case TypeSign:
		r, err := CheckSigned(reply.Body, p.Key.DID(), p.Responder, h, w.Secs, p.Bounds, p.Mine)
		var d *Disagreement
		if errors.As(err, &d) {
			out.Refused = true
			out.Dispute = &DisputeBody{WindowStart: d.Window, Counts: d.Theirs, Round: body.Round, Reason: "signed figures refused: " + d.Reason}
			open := DisputeBody{WindowStart: w.Start, Counts: w.Mine, Round: body.Round, Reason: d.Reason, Evidence: w.Evidence}
			p.Send(ctx, TypeDisputeOpen, open) // best effort: the responder keeps it, answers nothing
			return out, nil
		}
		if err != nil {
			return Outcome{}, err
		}
		if err := r.Sign(p.Key); err != nil {
			return Outcome{}, err
		}
		if err := r.Verify(); err != nil {
			return Outcome{}, err
		}
		if err := p.Store(r); err != nil {
			return Outcome{}, err
		}
		out.Receipt = r
		return out, nil
	case TypeDisputeOpen:
		var d DisputeBody
		if err := json.Unmarshal(reply.Body, &d); err != nil {
			return Outcome{}, fmt.Errorf("dispute body: %w", err)
		}
		d.Findings = d.Findings[:min(len(d.Findings), MaxFindings)]
		out.Dispute = &d
		return out, nil
	}
	return Outcome{}, fmt.Errorf("unexpected answer %s to a proposal", reply.Type)
}

// Countersign sends the proposer's signature of a stored receipt; the
// responder's acknowledgement clears it (the caller's record).
func (p *Proposer) Countersign(ctx context.Context, r *receipt.Receipt) error {
	raw, err := r.Encode()
	if err != nil {
		return err
	}
	if _, err := p.Send(ctx, TypeCountersign, ReceiptBody{Receipt: raw}); err != nil {
		return fmt.Errorf("countersignature of seq %d stored, not yet delivered: %w", r.Seq, err)
	}
	return nil
}
