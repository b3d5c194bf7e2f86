package receipt

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"

	"fleetmesh.org/fleetmesh/internal/canon"
)

// ForkProof is two validly co-signed receipts of one pair with one
// sequence number and different content: proof that the pair rewrote its
// history (spec/receipts.md). It verifies with no trust in whoever sent
// it. First and Second are the receipts' canonical bytes, First's CID
// sorting before Second's, so one fork has one encoding.
type ForkProof struct {
	V      int    `cbor:"v"`
	First  []byte `cbor:"first"`
	Second []byte `cbor:"second"`
}

// ErrNotFork is wrapped by ForkProof.Verify when the two receipts are not a fork.
var ErrNotFork = errors.New("not a fork")

// NewForkProof builds the proof from two receipts, checking it.
func NewForkProof(x, y *Receipt) (*ForkProof, error) {
	bx, err := x.Encode()
	if err != nil {
		return nil, err
	}
	by, err := y.Encode()
	if err != nil {
		return nil, err
	}
	cx, _ := x.CID()
	cy, _ := y.CID()
	if cy.KeyString() < cx.KeyString() {
		bx, by = by, bx
	}
	p := &ForkProof{V: Version, First: bx, Second: by}
	if _, _, err := p.Verify(); err != nil {
		return nil, err
	}
	return p, nil
}

// Encode returns the proof's canonical bytes.
func (p *ForkProof) Encode() ([]byte, error) { return canon.Marshal(p) }

// ID is the proof's content address (raw CID of its canonical bytes).
func (p *ForkProof) ID() (cid.Cid, error) {
	b, err := p.Encode()
	if err != nil {
		return cid.Undef, err
	}
	return CIDOf(b)
}

// DecodeForkProof parses and verifies a fork proof.
func DecodeForkProof(data []byte) (*ForkProof, error) {
	var p ForkProof
	if err := canon.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("fork proof: %w", err)
	}
	if _, _, err := p.Verify(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Verify checks the proof and returns its two receipts.
func (p *ForkProof) Verify() (*Receipt, *Receipt, error) {
	if p.V != Version {
		return nil, nil, fmt.Errorf("fork proof: version %d, want %d", p.V, Version)
	}
	x, err := Decode(p.First)
	if err != nil {
		return nil, nil, fmt.Errorf("fork proof: first: %w", err)
	}
	y, err := Decode(p.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("fork proof: second: %w", err)
	}
	for i, r := range []*Receipt{x, y} {
		if r.Disputed {
			return nil, nil, fmt.Errorf("fork proof: %w: receipt %d is a disputed one, outside the chain", ErrNotFork, i+1)
		}
		if err := r.Verify(); err != nil {
			return nil, nil, fmt.Errorf("fork proof: receipt %d: %w", i+1, err)
		}
	}
	if x.A != y.A || x.B != y.B || x.Seq != y.Seq {
		return nil, nil, fmt.Errorf("fork proof: %w: different pairs or sequence numbers", ErrNotFork)
	}
	cx, _ := x.CID()
	cy, _ := y.CID()
	if bytes.Compare([]byte(cx.KeyString()), []byte(cy.KeyString())) >= 0 {
		return nil, nil, fmt.Errorf("fork proof: %w: the receipts are the same or out of order", ErrNotFork)
	}
	return x, y, nil
}
