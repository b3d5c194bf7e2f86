package receipt

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/canon"
)

// Version is the receipt format version.
const Version = 1

// SignaturePrefix is prepended to a receipt's canonical bytes before
// signing, so that a receipt signature can never be replayed as a
// signature over some other fleetmesh record.
const SignaturePrefix = "fleetmesh receipt v1\x00"

// Counts are amounts of each metered service (spec/receipts.md).
type Counts struct {
	// Events and Bytes are events relayed (gossip forwarding, sync fetch
	// and push; a leaf's metered relay connection, spec/leaf.md) and
	// their bytes.
	Events uint64 `cbor:"events" json:"events"`
	Bytes  uint64 `cbor:"bytes" json:"bytes"`
	// StorageBytes are bytes of events placed for durable storage.
	StorageBytes uint64 `cbor:"storage_bytes" json:"storage_bytes"`
	// CircuitSeconds and CircuitBytes are circuit-relay time and data.
	CircuitSeconds uint64 `cbor:"circuit_seconds" json:"circuit_seconds"`
	CircuitBytes   uint64 `cbor:"circuit_bytes" json:"circuit_bytes"`
	// MediationMessages are DIDComm messages queued or delivered by a
	// mediator (forward, pickup).
	MediationMessages uint64 `cbor:"mediation_messages" json:"mediation_messages"`
	// ComputeUnits are units of compute (reserved for the compute market).
	ComputeUnits uint64 `cbor:"compute_units" json:"compute_units"`
}

// IsZero reports whether every count is zero.
func (c Counts) IsZero() bool { return c == Counts{} }

// Add returns c + o.
func (c Counts) Add(o Counts) Counts {
	return Counts{c.Events + o.Events, c.Bytes + o.Bytes, c.StorageBytes + o.StorageBytes,
		c.CircuitSeconds + o.CircuitSeconds, c.CircuitBytes + o.CircuitBytes,
		c.MediationMessages + o.MediationMessages, c.ComputeUnits + o.ComputeUnits}
}

// Fields returns the counts in a fixed order with their names.
func (c Counts) Fields() []Field {
	return []Field{{"events", c.Events}, {"bytes", c.Bytes}, {"storage_bytes", c.StorageBytes},
		{"circuit_seconds", c.CircuitSeconds}, {"circuit_bytes", c.CircuitBytes},
		{"mediation_messages", c.MediationMessages}, {"compute_units", c.ComputeUnits}}
}

// Field is one named count.
type Field struct {
	Name  string
	Value uint64
}

// Side is one node's figures for a window: what it gave the other and
// what it received from it.
type Side struct {
	Gave     Counts `cbor:"gave" json:"gave"`
	Received Counts `cbor:"received" json:"received"`
}

// Add returns s + o, each direction added.
func (s Side) Add(o Side) Side {
	return Side{Gave: s.Gave.Add(o.Gave), Received: s.Received.Add(o.Received)}
}

// Receipt is one pair's record of one window. A and B are the pair's
// DIDs, A sorting first. A co-signed receipt carries SigA and SigB over
// the same bytes (SigningBytes); a disputed receipt (Disputed) is outside
// the chain (Seq 0, no Prev) and is signed by the node reporting it only.
type Receipt struct {
	V int    `cbor:"v"`
	A string `cbor:"a"`
	B string `cbor:"b"`
	// WindowStart is the window's start (Unix seconds, UTC), a multiple of
	// WindowSecs.
	WindowStart int64 `cbor:"window_start"`
	WindowSecs  int64 `cbor:"window_secs"`
	// Seq numbers the pair's co-signed receipts from 1.
	Seq uint64 `cbor:"seq"`
	// Prev is the CID (binary) of the pair's receipt Seq-1; nil (CBOR
	// null) for Seq 1.
	Prev []byte `cbor:"prev"`
	// CountsA and CountsB are each side's own figures.
	CountsA Side `cbor:"counts_a"`
	CountsB Side `cbor:"counts_b"`
	// Disputed marks a window the pair could not agree on.
	Disputed bool `cbor:"disputed"`
	// Settlement is reserved and must be present and null.
	Settlement canon.RawMessage `cbor:"settlement"`
	SigA       []byte           `cbor:"sig_a,omitempty"`
	SigB       []byte           `cbor:"sig_b,omitempty"`
}

// Errors a receipt is refused with; each wraps into a message naming the
// field.
var (
	ErrSettlement = errors.New("settlement must be present and null in receipt format v1")
	ErrSignature  = errors.New("signature does not verify")
	ErrMalformed  = errors.New("malformed receipt")
)

// Pair returns the pair's DIDs in receipt order (the one sorting first
// is A).
func Pair(x, y string) (a, b string) {
	if x < y {
		return x, y
	}
	return y, x
}

// PairKey names a pair: "A B".
func (r *Receipt) PairKey() string { return r.A + " " + r.B }

// Has reports whether did is one of the pair.
func (r *Receipt) Has(did string) bool { return r.A == did || r.B == did }

// New returns an unsigned receipt with a null settlement.
func New(a, b string, windowStart, windowSecs int64, seq uint64, prev cid.Cid, ca, cb Side) *Receipt {
	r := &Receipt{V: Version, A: a, B: b, WindowStart: windowStart, WindowSecs: windowSecs,
		Seq: seq, CountsA: ca, CountsB: cb, Settlement: canon.Null}
	if prev.Defined() {
		r.Prev = prev.Bytes()
	}
	return r
}

// SigningBytes are the canonical bytes both signatures cover: the receipt
// without its signatures.
func (r *Receipt) SigningBytes() ([]byte, error) {
	c := *r
	c.SigA, c.SigB = nil, nil
	return canon.Marshal(&c)
}

// CID is the receipt's content address: CIDv1, raw codec, sha2-256 of
// SigningBytes. The signatures are not part of it, so both sides know the
// CID before either signs.
func (r *Receipt) CID() (cid.Cid, error) {
	b, err := r.SigningBytes()
	if err != nil {
		return cid.Undef, err
	}
	return CIDOf(b)
}

// CIDOf is the raw sha2-256 CIDv1 of b.
func CIDOf(b []byte) (cid.Cid, error) {
	h, err := multihash.Sum(b, multihash.SHA2_256, -1)
	if err != nil {
		return cid.Undef, err
	}
	return cid.NewCidV1(cid.Raw, h), nil
}

// PrevCID decodes Prev (cid.Undef when nil).
func (r *Receipt) PrevCID() (cid.Cid, error) {
	if r.Prev == nil {
		return cid.Undef, nil
	}
	_, c, err := cid.CidFromBytes(r.Prev)
	if err != nil {
		return cid.Undef, err
	}
	return c, nil
}

// Sign adds key's signature as whichever side of the pair key is.
func (r *Receipt) Sign(key *identity.Key) error {
	b, err := r.SigningBytes()
	if err != nil {
		return err
	}
	sig := key.Sign(append([]byte(SignaturePrefix), b...))
	switch key.DID() {
	case r.A:
		r.SigA = sig
	case r.B:
		r.SigB = sig
	default:
		return fmt.Errorf("receipt: %s is not a party to %s", key.DID(), r.PairKey())
	}
	return nil
}

// Encode returns the receipt's canonical bytes with its signatures.
func (r *Receipt) Encode() ([]byte, error) { return canon.Marshal(r) }

// Decode parses a receipt and checks its form (Check); it does not check
// signatures (Verify does).
func Decode(data []byte) (*Receipt, error) {
	var r Receipt
	if err := canon.Decode(data, &r); err != nil {
		return nil, fmt.Errorf("receipt: %w: %v", ErrMalformed, err)
	}
	if err := r.Check(); err != nil {
		return nil, err
	}
	if err := canon.CheckCanonical(data, &r); err != nil {
		return nil, fmt.Errorf("receipt: %w: %v", ErrMalformed, err)
	}
	return &r, nil
}

// Check checks everything about a receipt except its signatures.
func (r *Receipt) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("receipt: %w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	if len(r.Settlement) == 0 {
		return fmt.Errorf("receipt: %w: the field is missing", ErrSettlement)
	}
	if string(r.Settlement) != string(canon.Null) {
		return fmt.Errorf("receipt: %w: it holds a value", ErrSettlement)
	}
	switch {
	case r.V != Version:
		return bad("version %d, want %d", r.V, Version)
	case !(r.A < r.B):
		return bad("a must sort before b")
	case r.WindowSecs <= 0:
		return bad("window_secs %d must be positive", r.WindowSecs)
	case r.WindowStart < 0 || r.WindowStart%r.WindowSecs != 0:
		return bad("window_start %d is not aligned to window_secs %d (UTC)", r.WindowStart, r.WindowSecs)
	}
	for _, d := range []string{r.A, r.B} {
		if !strings.HasPrefix(d, "did:key:") {
			return bad("party %q is not a did:key", d)
		}
		if _, err := identity.PublicKeyFromDID(d); err != nil {
			return bad("party %q: %v", d, err)
		}
	}
	if r.Disputed {
		if r.Seq != 0 || r.Prev != nil {
			return bad("a disputed receipt is outside the chain: seq 0 and prev null")
		}
		if (r.SigA == nil) == (r.SigB == nil) {
			return bad("a disputed receipt is signed by the reporting side only")
		}
		return nil
	}
	if r.Seq == 0 {
		return bad("seq starts at 1")
	}
	if (r.Seq == 1) != (r.Prev == nil) {
		return bad("prev must be null exactly when seq is 1")
	}
	if r.Prev != nil {
		c, err := r.PrevCID()
		if err != nil {
			return bad("prev: %v", err)
		}
		if c.Bytes() == nil || string(c.Bytes()) != string(r.Prev) {
			return bad("prev is not a canonical CID")
		}
	}
	return nil
}

// Verify checks the receipt's form and every signature it carries; a
// co-signed receipt needs both.
func (r *Receipt) Verify() error {
	if err := r.Check(); err != nil {
		return err
	}
	b, err := r.SigningBytes()
	if err != nil {
		return err
	}
	msg := append([]byte(SignaturePrefix), b...)
	check := func(did string, sig []byte, side string) error {
		if sig == nil {
			if r.Disputed {
				return nil
			}
			return fmt.Errorf("receipt: %w: sig_%s is missing", ErrSignature, side)
		}
		pub, err := identity.PublicKeyFromDID(did)
		if err != nil {
			return err
		}
		if len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, msg, sig) {
			return fmt.Errorf("receipt: %w: sig_%s by %s", ErrSignature, side, did)
		}
		return nil
	}
	if err := check(r.A, r.SigA, "a"); err != nil {
		return err
	}
	return check(r.B, r.SigB, "b")
}

// Side returns did's own figures.
func (r *Receipt) Side(did string) Side {
	if did == r.A {
		return r.CountsA
	}
	return r.CountsB
}
