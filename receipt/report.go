package receipt

import (
	"crypto/ed25519"
	"fmt"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/canon"
)

// ReportSignaturePrefix is prepended to a report's canonical bytes before
// signing.
const ReportSignaturePrefix = "fleetmesh report v1\x00"

// Report is one node's signed publication of one window, made after the
// window's dispute period: the co-signed receipts of that window and the
// disputed receipts of the windows it could not agree on.
type Report struct {
	V           int      `cbor:"v"`
	Node        string   `cbor:"node"`
	WindowStart int64    `cbor:"window_start"`
	WindowSecs  int64    `cbor:"window_secs"`
	Receipts    [][]byte `cbor:"receipts"`
	Disputed    [][]byte `cbor:"disputed"`
	Sig         []byte   `cbor:"sig,omitempty"`
}

func (r *Report) signingBytes() ([]byte, error) {
	c := *r
	c.Sig = nil
	b, err := canon.Marshal(&c)
	if err != nil {
		return nil, err
	}
	return append([]byte(ReportSignaturePrefix), b...), nil
}

// Sign signs the report with the node's key.
func (r *Report) Sign(key *identity.Key) error {
	if key.DID() != r.Node {
		return fmt.Errorf("report: signed by %s, not its node %s", key.DID(), r.Node)
	}
	b, err := r.signingBytes()
	if err != nil {
		return err
	}
	r.Sig = key.Sign(b)
	return nil
}

// Encode returns the report's canonical bytes.
func (r *Report) Encode() ([]byte, error) { return canon.Marshal(r) }

// DecodeReport parses a report and verifies its signature and every
// receipt in it.
func DecodeReport(data []byte) (*Report, error) {
	var r Report
	if err := canon.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if err := r.Verify(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Verify checks the report's signature and its receipts: each verifies,
// involves the node and lies in the report's window (co-signed ones), or
// is disputed and signed by the node (disputed ones).
func (r *Report) Verify() error {
	if r.V != Version {
		return fmt.Errorf("report: version %d, want %d", r.V, Version)
	}
	pub, err := identity.PublicKeyFromDID(r.Node)
	if err != nil {
		return fmt.Errorf("report: node: %w", err)
	}
	b, err := r.signingBytes()
	if err != nil {
		return err
	}
	if len(r.Sig) != ed25519.SignatureSize || !ed25519.Verify(pub, b, r.Sig) {
		return fmt.Errorf("report: %w", ErrSignature)
	}
	for i, raw := range r.Receipts {
		rc, err := Decode(raw)
		if err == nil {
			err = rc.Verify()
		}
		if err == nil && (rc.Disputed || !rc.Has(r.Node) || rc.WindowStart != r.WindowStart) {
			err = fmt.Errorf("not a co-signed receipt of %s for window %d", r.Node, r.WindowStart)
		}
		if err != nil {
			return fmt.Errorf("report: receipt %d: %w", i, err)
		}
	}
	for i, raw := range r.Disputed {
		rc, err := Decode(raw)
		if err == nil {
			err = rc.Verify()
		}
		if err == nil && (!rc.Disputed || !(rc.A == r.Node && rc.SigA != nil || rc.B == r.Node && rc.SigB != nil)) {
			err = fmt.Errorf("not a disputed receipt of %s", r.Node)
		}
		if err != nil {
			return fmt.Errorf("report: disputed %d: %w", i, err)
		}
	}
	return nil
}
