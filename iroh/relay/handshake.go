package relay

import (
	"crypto/ed25519"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"

	"lukechampine.com/blake3"
)

// The handshake's payloads are postcard-encoded (the serde format iroh
// uses): fixed-size arrays as their bytes, byte strings and strings as an
// unsigned LEB128 length and their bytes, a unit struct as nothing.

// challengeContext is the BLAKE3 derive-key context whose output over the
// challenge the client signs.
const challengeContext = "iroh-relay handshake v1 challenge signature"

// keyingLabel is the TLS exporter label of the header authentication.
const keyingLabel = "iroh-relay handshake v1"

// ClientAuthHeader carries a client's signature over TLS keying material, so
// that a client on TLS skips the challenge.
const ClientAuthHeader = "X-Iroh-Relay-Client-Auth-V1"

// ErrAuth is a client's failed authentication.
var ErrAuth = errors.New("relay handshake: signature invalid")

// ClientAuth is a client's answer to the challenge: its EndpointId and its
// Ed25519 signature.
type ClientAuth struct {
	Key       [KeyLen]byte
	Signature [64]byte
}

// ChallengeMessage is what a client signs for challenge c.
func ChallengeMessage(c [16]byte) [32]byte {
	var out [32]byte
	blake3.DeriveKey(out[:], challengeContext, c[:])
	return out
}

// Verify checks a's signature over challenge c.
func (a ClientAuth) Verify(c [16]byte) error {
	m := ChallengeMessage(c)
	if !ed25519.Verify(ed25519.PublicKey(a.Key[:]), m[:], a.Signature[:]) {
		return ErrAuth
	}
	return nil
}

// SignChallenge is a client's ClientAuth for challenge c.
func SignChallenge(key ed25519.PrivateKey, c [16]byte) ClientAuth {
	var a ClientAuth
	copy(a.Key[:], key.Public().(ed25519.PublicKey))
	m := ChallengeMessage(c)
	copy(a.Signature[:], ed25519.Sign(key, m[:]))
	return a
}

// DecodeClientAuth decodes a ClientAuth frame (its type included).
func DecodeClientAuth(b []byte) (ClientAuth, error) {
	t, p, err := ReadFrameType(b)
	if err != nil {
		return ClientAuth{}, err
	}
	if t != FrameClientAuth {
		return ClientAuth{}, fmt.Errorf("%w: %d during the handshake, want ClientAuth (1)", ErrFrameType, t)
	}
	var a ClientAuth
	if len(p) < KeyLen {
		return ClientAuth{}, ErrShort
	}
	copy(a.Key[:], p)
	sig, err := readPostcardBytes(p[KeyLen:], true)
	if err != nil {
		return ClientAuth{}, err
	}
	if len(sig) != 64 {
		return ClientAuth{}, fmt.Errorf("%w: signature of %d bytes", ErrEncoding, len(sig))
	}
	copy(a.Signature[:], sig)
	return a, nil
}

// AppendClientAuth appends a's frame.
func AppendClientAuth(b []byte, a ClientAuth) []byte {
	b = appendFrameType(b, FrameClientAuth)
	b = append(b, a.Key[:]...)
	b = appendPostcardLen(b, 64)
	return append(b, a.Signature[:]...)
}

// AppendServerChallenge appends a challenge frame.
func AppendServerChallenge(b []byte, c [16]byte) []byte {
	return append(appendFrameType(b, FrameServerChallenge), c[:]...)
}

// AppendServerConfirmsAuth appends the frame that ends a successful
// handshake.
func AppendServerConfirmsAuth(b []byte) []byte { return appendFrameType(b, FrameServerConfirmsAuth) }

// AppendServerDeniesAuth appends a refusal with its reason.
func AppendServerDeniesAuth(b []byte, reason string) []byte {
	b = appendFrameType(b, FrameServerDeniesAuth)
	b = appendPostcardLen(b, len(reason))
	return append(b, reason...)
}

// KeyMaterialAuth is the ClientAuthHeader's content: a signature over the
// first 16 bytes of 32 bytes of TLS keying material (label keyingLabel,
// context the client's key), and the other 16 so the relay can check
// that both ends exported the same.
type KeyMaterialAuth struct {
	Key       [KeyLen]byte
	Signature [64]byte
	Suffix    [16]byte
}

// DecodeKeyMaterialAuth decodes the header value (base64url, unpadded).
func DecodeKeyMaterialAuth(v string) (KeyMaterialAuth, error) {
	p, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return KeyMaterialAuth{}, fmt.Errorf("%w: %s is not base64url: %v", ErrEncoding, ClientAuthHeader, err)
	}
	var a KeyMaterialAuth
	if len(p) < KeyLen {
		return KeyMaterialAuth{}, ErrShort
	}
	copy(a.Key[:], p)
	p = p[KeyLen:]
	n, w, err := readPostcardVarint(p)
	if err != nil {
		return KeyMaterialAuth{}, err
	}
	if n != 64 || len(p) != w+64+16 {
		return KeyMaterialAuth{}, fmt.Errorf("%w: %s has the wrong length", ErrEncoding, ClientAuthHeader)
	}
	copy(a.Signature[:], p[w:])
	copy(a.Suffix[:], p[w+64:])
	return a, nil
}

// Verify checks a against the keying material of the TLS connection st.
func (a KeyMaterialAuth) Verify(st *tls.ConnectionState) error {
	km, err := st.ExportKeyingMaterial(keyingLabel, a.Key[:], 32)
	if err != nil {
		return fmt.Errorf("relay handshake: no TLS keying material: %w", err)
	}
	if string(km[16:]) != string(a.Suffix[:]) {
		return errors.New("relay handshake: keying material suffix differs")
	}
	if !ed25519.Verify(ed25519.PublicKey(a.Key[:]), km[:16], a.Signature[:]) {
		return ErrAuth
	}
	return nil
}

// readPostcardVarint decodes an unsigned LEB128 integer of at most 10 bytes.
func readPostcardVarint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	if len(b) < 10 {
		return 0, 0, ErrShort
	}
	return 0, 0, fmt.Errorf("%w: varint longer than 10 bytes", ErrEncoding)
}

// readPostcardBytes decodes a length-prefixed byte string; whole requires
// it to fill b.
func readPostcardBytes(b []byte, whole bool) ([]byte, error) {
	n, w, err := readPostcardVarint(b)
	if err != nil {
		return nil, err
	}
	if n > uint64(len(b)-w) {
		return nil, ErrShort
	}
	s := b[w : w+int(n)]
	if whole && w+int(n) != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrEncoding, len(b)-w-int(n))
	}
	return s, nil
}

func appendPostcardLen(b []byte, n int) []byte {
	u := uint64(n)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}
