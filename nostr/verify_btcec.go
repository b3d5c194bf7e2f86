package nostr

import (
	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
)

// parsePubKey lifts an x-only key to the curve point with even y (BIP-340
// lift_x).
func parsePubKey(x [32]byte) (*btcec.JacobianPoint, error) {
	pub, err := schnorr.ParsePubKey(x[:])
	if err != nil || !pub.IsOnCurve() {
		return nil, ErrBadPubKey
	}
	p := new(btcec.JacobianPoint)
	pub.AsJacobian(p)
	return p, nil
}

// verifySig is BIP-340 verification of the event's signature over its id
// (already checked) by the point pk. It is btcec's own algorithm made of
// btcec's own operations; it is spelled out here only because btcec's
// Verify takes the key as bytes and lifts it again on every call. It also
// refuses s >= n, as BIP-340 requires and btcec v2.3.5 does not check.
// With t, pk's keyTable, s·G + e·P is computed from the tables instead
// (same point, fewer operations).
func verifySig(e *Event, pk *btcec.JacobianPoint, t *keyTable) error {
	var r btcec.FieldVal
	if overflow := r.SetByteSlice(e.Sig[:32]); overflow {
		return ErrBadSignature
	}
	var s btcec.ModNScalar
	if overflow := s.SetByteSlice(e.Sig[32:]); overflow {
		return ErrBadSignature
	}
	// e = tagged_hash("BIP0340/challenge", r || P || m) mod n, negated so
	// that R = s*G + (-e)*P is one addition.
	h := chainhash.TaggedHash(chainhash.TagBIP0340Challenge, e.Sig[:32], e.PubKey[:], e.ID[:])
	var c btcec.ModNScalar
	c.SetBytes((*[32]byte)(h))
	c.Negate()
	var R btcec.JacobianPoint
	if t != nil {
		t.mulAdd(&s, &c, &R)
	} else {
		var sG, eP btcec.JacobianPoint
		btcec.ScalarBaseMultNonConst(&s, &sG)
		btcec.ScalarMultNonConst(&c, pk, &eP)
		btcec.AddNonConst(&sG, &eP, &R)
	}
	if (R.X.IsZero() && R.Y.IsZero()) || R.Z.IsZero() {
		return ErrBadSignature
	}
	R.ToAffine()
	if R.Y.IsOdd() || !r.Equals(&R.X) {
		return ErrBadSignature
	}
	return nil
}
