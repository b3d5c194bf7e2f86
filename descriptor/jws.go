package descriptor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"fleetmesh.org/fleetmesh/identity"
)

// Type is the JWS `typ` header of a node descriptor (RFC 7515 §4.1.9, with
// the "application/" prefix omitted as that section recommends).
const Type = "fleetmesh-descriptor+jws"

// Signed is a verified (or freshly signed) descriptor with its encoding.
type Signed struct {
	// Descriptor is the decoded payload.
	Descriptor Descriptor
	// JWS is the compact serialization, the bytes that travel and that the
	// CID addresses.
	JWS []byte
	// CID is CIDv1, raw codec, sha2-256 of JWS.
	CID cid.Cid
}

// Sign encodes d, signs it with k and returns the signed descriptor. d.DID
// must be k's DID; d.V is set to Version. d must pass Validate.
func Sign(k *identity.Key, d Descriptor, lim Limits) (*Signed, error) {
	d.V = Version
	if d.DID != k.DID() {
		return nil, fmt.Errorf("descriptor: sign %s with the key of %s: %w", d.DID, k.DID(), ErrWrongSigner)
	}
	if err := d.Validate(lim); err != nil {
		return nil, err
	}
	payload, err := json.Marshal(&d)
	if err != nil {
		return nil, fmt.Errorf("descriptor: encode: %w", err)
	}
	raw, err := signPayload(k, payload)
	if err != nil {
		return nil, err
	}
	if len(raw) > lim.MaxBytes {
		return nil, fmt.Errorf("descriptor: signed descriptor is %d bytes, at most %d: %w", len(raw), lim.MaxBytes, ErrMalformed)
	}
	return &Signed{Descriptor: d, JWS: raw, CID: CIDOf(raw)}, nil
}

// signPayload wraps payload bytes in a compact JWS signed by k. It does not
// look at the payload, so tests can sign payloads Sign would refuse.
func signPayload(k *identity.Key, payload []byte) ([]byte, error) {
	kid, err := identity.SigningKeyID(k.DID())
	if err != nil {
		return nil, fmt.Errorf("descriptor: %w", err)
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: k.PrivateKey(), KeyID: kid}},
		(&jose.SignerOptions{}).WithType(Type))
	if err != nil {
		return nil, fmt.Errorf("descriptor: signer: %w", err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return nil, fmt.Errorf("descriptor: sign: %w", err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		return nil, fmt.Errorf("descriptor: serialize: %w", err)
	}
	return []byte(s), nil
}

// CIDOf returns the CIDv1 (raw codec, sha2-256) of an encoded descriptor.
func CIDOf(jws []byte) cid.Cid {
	mh, err := multihash.Sum(jws, multihash.SHA2_256, -1)
	if err != nil {
		// sha2-256 is always registered in go-multihash.
		panic(fmt.Sprintf("descriptor: sha2-256 multihash: %v", err))
	}
	return cid.NewCidV1(cid.Raw, mh)
}

// Parse decodes a compact-JWS descriptor and checks everything except time:
// envelope, type, signature, signer and payload rules. Most callers want
// Verify or a Verifier.
func Parse(raw []byte, lim Limits) (*Signed, error) {
	if len(raw) > lim.MaxBytes {
		return nil, fmt.Errorf("descriptor: %d bytes, at most %d: %w", len(raw), lim.MaxBytes, ErrMalformed)
	}
	obj, err := jose.ParseSignedCompact(string(raw), []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		var alg *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &alg) {
			return nil, fmt.Errorf("descriptor: %v: %w", err, ErrUnsupportedType)
		}
		return nil, fmt.Errorf("descriptor: not a compact JWS: %v: %w", err, ErrMalformed)
	}
	if len(obj.Signatures) != 1 {
		return nil, fmt.Errorf("descriptor: %d signatures, want 1: %w", len(obj.Signatures), ErrMalformed)
	}
	h := obj.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != Type {
		return nil, fmt.Errorf("descriptor: typ %q, want %q: %w", typ, Type, ErrUnsupportedType)
	}
	if len(h.ExtraHeaders) != 1 {
		// Only typ besides alg and kid: a header this version does not know
		// (crit in particular) must not be silently ignored.
		return nil, fmt.Errorf("descriptor: unexpected JWS header parameters: %w", ErrMalformed)
	}
	signerPub, err := identity.PublicKeyFromDID(h.KeyID)
	if err != nil {
		return nil, fmt.Errorf("descriptor: kid %q: %v: %w", h.KeyID, err, ErrMalformed)
	}
	if want, _ := identity.SigningKeyID(h.KeyID); h.KeyID != want {
		return nil, fmt.Errorf("descriptor: kid %q is not a did:key verification method id (want %q): %w", h.KeyID, want, ErrMalformed)
	}
	payload, err := obj.Verify(signerPub)
	if err != nil {
		return nil, fmt.Errorf("descriptor: kid %s: %w", h.KeyID, ErrBadSignature)
	}
	var d Descriptor
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("descriptor: payload: %v: %w", err, ErrMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("descriptor: payload has data after the JSON object: %w", ErrMalformed)
	}
	if _, err := publicKeyOf(d.DID); err != nil {
		return nil, err
	}
	if signerDID, _, _ := strings.Cut(h.KeyID, "#"); signerDID != d.DID {
		return nil, fmt.Errorf("descriptor: %s signed by %s: %w", d.DID, signerDID, ErrWrongSigner)
	}
	if err := d.Validate(lim); err != nil {
		return nil, err
	}
	return &Signed{Descriptor: d, JWS: append([]byte(nil), raw...), CID: CIDOf(raw)}, nil
}

// Verify parses raw and checks it is valid at now. It does not detect
// replays; a Verifier does.
func Verify(raw []byte, now time.Time, lim Limits) (*Signed, error) {
	s, err := Parse(raw, lim)
	if err != nil {
		return nil, err
	}
	if err := s.Descriptor.CheckTime(now, lim); err != nil {
		return nil, err
	}
	return s, nil
}
