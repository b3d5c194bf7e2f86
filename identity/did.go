package identity

import (
	"crypto/ed25519"
	"crypto/sha512"
	"errors"
	"fmt"
	"strings"

	"filippo.io/edwards25519"
	"github.com/mr-tron/base58"
)

// Multicodec prefixes (varint-encoded) from the multiformats table: 0xed is
// ed25519-pub and 0xec is x25519-pub.
var (
	ed25519Codec = []byte{0xed, 0x01}
	x25519Codec  = []byte{0xec, 0x01}
)

// DIDKeyPrefix starts every did:key DID.
const DIDKeyPrefix = "did:key:"

// Errors returned when parsing names. They are wrapped with the input that
// failed.
var (
	ErrNotDIDKey     = errors.New("not a did:key DID")
	ErrNotMultibase  = errors.New("not base58btc multibase (must start with 'z')")
	ErrWrongCodec    = errors.New("multicodec is not the expected key type")
	ErrWrongKeyLen   = errors.New("wrong public key length")
	ErrNotOnCurve    = errors.New("public key is not a valid curve point")
	ErrBadEndpointID = errors.New("not an iroh EndpointId (64 hex characters)")
)

// MultibaseEd25519 encodes an Ed25519 public key as multibase base58btc with
// the ed25519-pub multicodec prefix (z6Mk…).
func MultibaseEd25519(pub ed25519.PublicKey) string {
	return "z" + base58.Encode(append(append([]byte{}, ed25519Codec...), pub...))
}

// MultibaseX25519 encodes an X25519 public key as multibase base58btc with
// the x25519-pub multicodec prefix (z6LS…).
func MultibaseX25519(pub []byte) string {
	return "z" + base58.Encode(append(append([]byte{}, x25519Codec...), pub...))
}

// DIDFromPublicKey returns the did:key DID of an Ed25519 public key.
func DIDFromPublicKey(pub ed25519.PublicKey) string {
	return DIDKeyPrefix + MultibaseEd25519(pub)
}

// PublicKeyFromDID parses a did:key DID (optionally with a #fragment) of an
// Ed25519 key and returns the key.
func PublicKeyFromDID(did string) (ed25519.PublicKey, error) {
	did, _, _ = strings.Cut(did, "#")
	mb, ok := strings.CutPrefix(did, DIDKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("identity: %q: %w", did, ErrNotDIDKey)
	}
	return decodeMultibaseKey(mb, ed25519Codec, true)
}

// PublicKeyFromMultibase parses a multibase ed25519-pub key (z6Mk…).
func PublicKeyFromMultibase(mb string) (ed25519.PublicKey, error) {
	return decodeMultibaseKey(mb, ed25519Codec, true)
}

// X25519FromMultibase parses a multibase x25519-pub key (z6LS…).
func X25519FromMultibase(mb string) ([]byte, error) {
	return decodeMultibaseKey(mb, x25519Codec, false)
}

func decodeMultibaseKey(mb string, codec []byte, edwards bool) ([]byte, error) {
	rest, ok := strings.CutPrefix(mb, "z")
	if !ok {
		return nil, fmt.Errorf("identity: %q: %w", mb, ErrNotMultibase)
	}
	raw, err := base58.Decode(rest)
	if err != nil {
		return nil, fmt.Errorf("identity: %q: %w: %v", mb, ErrNotMultibase, err)
	}
	if len(raw) < 2 || raw[0] != codec[0] || raw[1] != codec[1] {
		return nil, fmt.Errorf("identity: %q: %w", mb, ErrWrongCodec)
	}
	key := raw[2:]
	if len(key) != 32 {
		return nil, fmt.Errorf("identity: %q: %w: %d bytes", mb, ErrWrongKeyLen, len(key))
	}
	if edwards {
		if _, err := new(edwards25519.Point).SetBytes(key); err != nil {
			return nil, fmt.Errorf("identity: %q: %w", mb, ErrNotOnCurve)
		}
		return ed25519.PublicKey(key), nil
	}
	return key, nil
}

// X25519PublicFromEd25519 maps an Ed25519 public key to its X25519 form with
// the birational map from the twisted Edwards curve to Curve25519 (RFC 7748
// §4.1), which is how did:key derives the key-agreement key.
func X25519PublicFromEd25519(pub ed25519.PublicKey) ([]byte, error) {
	p, err := new(edwards25519.Point).SetBytes(pub)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", ErrNotOnCurve)
	}
	return p.BytesMontgomery(), nil
}

// X25519PrivateFromEd25519 derives the X25519 private scalar matching
// X25519PublicFromEd25519: the first half of SHA-512 of the Ed25519 seed
// (RFC 8032 §5.1.5), which X25519 clamps when it uses it.
func X25519PrivateFromEd25519(priv ed25519.PrivateKey) []byte {
	h := sha512.Sum512(priv.Seed())
	out := make([]byte, 32)
	copy(out, h[:32])
	out[0] &= 248
	out[31] &= 127
	out[31] |= 64
	return out
}
