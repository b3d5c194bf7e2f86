package descriptor

import "errors"

// Verification errors. Each reason a descriptor is refused has its own value
// so callers can act on it with errors.Is; the returned error wraps it with
// the detail that failed.
var (
	// ErrMalformed: not a compact JWS, not valid base64url or JSON, a
	// required field missing, or larger than Limits.MaxBytes.
	ErrMalformed = errors.New("malformed descriptor")
	// ErrUnsupportedType: the JWS header's typ or alg is not this format's,
	// or the payload version is unknown.
	ErrUnsupportedType = errors.New("not a fleetmesh node descriptor of a supported version")
	// ErrBadSignature: the signature does not verify under the key its kid
	// names, so the header or payload changed after signing (tampered).
	ErrBadSignature = errors.New("signature does not verify (tampered or forged)")
	// ErrWrongSigner: the signature is valid but made by a key other than
	// the descriptor DID's own.
	ErrWrongSigner = errors.New("signed by a key other than the descriptor's DID")
	// ErrUnknownClass: class is not anchor, home or leaf.
	ErrUnknownClass = errors.New("unknown node class")
	// ErrBadAddress: an address is not a valid multiaddr, ws/wss URL or iroh
	// endpoint, or names a different node.
	ErrBadAddress = errors.New("bad address")
	// ErrBadProtocol: a protocol id is empty, too long, not printable ASCII
	// or repeated.
	ErrBadProtocol = errors.New("bad protocol id")
	// ErrBadOffer: an offer is present but leaves a bound at zero.
	ErrBadOffer = errors.New("bad offer")
	// ErrBadValidity: the validity window is empty or longer than
	// Limits.MaxLifetime, or the sequence number is out of range.
	ErrBadValidity = errors.New("bad validity window")
	// ErrNotYetValid: issued-at is later than now plus the allowed clock
	// skew.
	ErrNotYetValid = errors.New("descriptor not yet valid")
	// ErrExpired: now is at or past the expiry.
	ErrExpired = errors.New("descriptor expired")
	// ErrReplayed: the sequence number is not higher than the highest this
	// Verifier has already accepted for the DID.
	ErrReplayed = errors.New("descriptor replayed (sequence number not higher than last seen)")
)
