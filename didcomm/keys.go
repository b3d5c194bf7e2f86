package didcomm

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"fleetmesh.org/fleetmesh/identity"
)

var b64 = base64.RawURLEncoding

// Curve names as JWK "crv" values.
const (
	CurveX25519 = "X25519"
	CurveP256   = "P-256"
	CurveP384   = "P-384"
)

// AgreementKey is a public key-agreement key of a DID (a keyAgreement
// verification method).
type AgreementKey struct {
	ID  string // DID URL, e.g. did:key:z6Mk…#z6LS…
	Key *ecdh.PublicKey
}

// SigningKey is a public authentication key of a DID.
type SigningKey struct {
	ID  string
	Key ed25519.PublicKey
}

// Keys is what a resolver returns for one DID: its key-agreement and
// authentication keys, each with its verification method id.
type Keys struct {
	DID            string
	KeyAgreement   []AgreementKey
	Authentication []SigningKey
}

// Resolver finds the keys of a DID. DIDKeyResolver resolves did:key with no
// network; StaticResolver serves fixed key sets.
type Resolver interface {
	Resolve(did string) (*Keys, error)
}

// ErrUnresolvable is returned when a DID or key id cannot be resolved.
var ErrUnresolvable = errors.New("DID cannot be resolved")

// DIDKeyResolver resolves did:key DIDs of Ed25519 keys through
// identity.Resolve: the DID document is a function of the DID.
type DIDKeyResolver struct{}

// Resolve implements Resolver.
func (DIDKeyResolver) Resolve(did string) (*Keys, error) {
	doc, err := identity.Resolve(did)
	if err != nil {
		return nil, fmt.Errorf("didcomm: %w: %v", ErrUnresolvable, err)
	}
	ks := &Keys{DID: doc.ID}
	for _, vm := range doc.VerificationMethod {
		switch vm.Type {
		case identity.TypeX25519KeyAgreementKey2020:
			raw, err := identity.X25519FromMultibase(vm.PublicKeyMultibase)
			if err != nil {
				return nil, fmt.Errorf("didcomm: %s: %w", vm.ID, err)
			}
			pub, err := ecdh.X25519().NewPublicKey(raw)
			if err != nil {
				return nil, fmt.Errorf("didcomm: %s: %w", vm.ID, err)
			}
			if contains(doc.KeyAgreement, vm.ID) {
				ks.KeyAgreement = append(ks.KeyAgreement, AgreementKey{ID: vm.ID, Key: pub})
			}
		case identity.TypeEd25519VerificationKey2020:
			pub, err := identity.PublicKeyFromMultibase(vm.PublicKeyMultibase)
			if err != nil {
				return nil, fmt.Errorf("didcomm: %s: %w", vm.ID, err)
			}
			if contains(doc.Authentication, vm.ID) {
				ks.Authentication = append(ks.Authentication, SigningKey{ID: vm.ID, Key: pub})
			}
		}
	}
	return ks, nil
}

// StaticResolver resolves from a fixed map of DID to keys: for peers whose
// documents were obtained out of band, and for test vectors.
type StaticResolver map[string]*Keys

// Resolve implements Resolver.
func (s StaticResolver) Resolve(did string) (*Keys, error) {
	ks, ok := s[did]
	if !ok {
		return nil, fmt.Errorf("didcomm: %s: %w", did, ErrUnresolvable)
	}
	return ks, nil
}

// AgreementSecret is a private key-agreement key with its verification
// method id.
type AgreementSecret struct {
	ID  string
	Key *ecdh.PrivateKey
}

// SigningSecret is a private Ed25519 authentication key with its
// verification method id.
type SigningSecret struct {
	ID  string
	Key ed25519.PrivateKey
}

// Secrets are the private keys of one DID: what a node packs from and
// unpacks with.
type Secrets struct {
	DID       string
	Signing   *SigningSecret
	Agreement []AgreementSecret
}

// SecretsFromKey returns a node's secrets: its Ed25519 key for signing and
// the X25519 key derived from it for key agreement, under the ids the
// did:key document gives them.
func SecretsFromKey(k *identity.Key) (*Secrets, error) {
	sid, err := identity.SigningKeyID(k.DID())
	if err != nil {
		return nil, err
	}
	kid, err := identity.KeyAgreementID(k.DID())
	if err != nil {
		return nil, err
	}
	x, err := ecdh.X25519().NewPrivateKey(k.X25519Private())
	if err != nil {
		return nil, fmt.Errorf("didcomm: X25519 key: %w", err)
	}
	return &Secrets{
		DID:       k.DID(),
		Signing:   &SigningSecret{ID: sid, Key: k.PrivateKey()},
		Agreement: []AgreementSecret{{ID: kid, Key: x}},
	}, nil
}

func (s *Secrets) agreement(kid string) *AgreementSecret {
	if s == nil {
		return nil
	}
	for i := range s.Agreement {
		if s.Agreement[i].ID == kid {
			return &s.Agreement[i]
		}
	}
	return nil
}

// jwk is the subset of RFC 7517 JWK members used for OKP and EC keys.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y,omitempty"`
	D   string `json:"d,omitempty"`
}

func curveOf(k *ecdh.PublicKey) string {
	switch k.Curve() {
	case ecdh.X25519():
		return CurveX25519
	case ecdh.P256():
		return CurveP256
	case ecdh.P384():
		return CurveP384
	}
	return ""
}

func ecdhCurve(crv string) (ecdh.Curve, int, error) {
	switch crv {
	case CurveX25519:
		return ecdh.X25519(), 32, nil
	case CurveP256:
		return ecdh.P256(), 32, nil
	case CurveP384:
		return ecdh.P384(), 48, nil
	}
	return nil, 0, fmt.Errorf("unsupported curve %q", crv)
}

// publicJWK encodes a key-agreement public key as a JWK (RFC 8037 OKP for
// X25519, RFC 7518 EC for the NIST curves).
func publicJWK(k *ecdh.PublicKey) jwk {
	raw := k.Bytes()
	crv := curveOf(k)
	if crv == CurveX25519 {
		return jwk{Kty: "OKP", Crv: crv, X: b64.EncodeToString(raw)}
	}
	n := (len(raw) - 1) / 2 // uncompressed point: 0x04 ‖ X ‖ Y
	return jwk{Kty: "EC", Crv: crv, X: b64.EncodeToString(raw[1 : 1+n]), Y: b64.EncodeToString(raw[1+n:])}
}

// PublicKeyFromJWK decodes a JWK key-agreement public key (OKP X25519 or EC
// P-256/P-384), checking it is a valid point of its curve.
func PublicKeyFromJWK(data []byte) (*ecdh.PublicKey, error) {
	var j jwk
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("didcomm: JWK: %w", err)
	}
	return j.public()
}

func (j jwk) public() (*ecdh.PublicKey, error) {
	curve, size, err := ecdhCurve(j.Crv)
	if err != nil {
		return nil, fmt.Errorf("didcomm: JWK: %w", err)
	}
	x, err := b64.DecodeString(j.X)
	if err != nil || len(x) != size {
		return nil, fmt.Errorf("didcomm: JWK: bad x coordinate")
	}
	var raw []byte
	switch {
	case j.Kty == "OKP" && j.Crv == CurveX25519:
		raw = x
	case j.Kty == "EC" && j.Crv != CurveX25519:
		y, err := b64.DecodeString(j.Y)
		if err != nil || len(y) != size {
			return nil, fmt.Errorf("didcomm: JWK: bad y coordinate")
		}
		raw = append(append([]byte{4}, x...), y...)
	default:
		return nil, fmt.Errorf("didcomm: JWK: kty %q does not fit crv %q", j.Kty, j.Crv)
	}
	pub, err := curve.NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("didcomm: JWK: %w", err)
	}
	return pub, nil
}

// PrivateKeyFromJWK decodes a JWK key-agreement private key and checks that
// its public half matches the JWK's x (and y).
func PrivateKeyFromJWK(data []byte) (*ecdh.PrivateKey, error) {
	var j jwk
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("didcomm: JWK: %w", err)
	}
	pub, err := j.public()
	if err != nil {
		return nil, err
	}
	d, err := b64.DecodeString(j.D)
	if err != nil {
		return nil, fmt.Errorf("didcomm: JWK: bad d")
	}
	priv, err := pub.Curve().NewPrivateKey(d)
	if err != nil {
		return nil, fmt.Errorf("didcomm: JWK: %w", err)
	}
	if !priv.PublicKey().Equal(pub) {
		return nil, fmt.Errorf("didcomm: JWK: d does not match x")
	}
	return priv, nil
}

// didOf strips the fragment (and any path or query) from a DID URL.
func didOf(kid string) string {
	did, _, _ := strings.Cut(kid, "#")
	did, _, _ = strings.Cut(did, "?")
	return did
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
