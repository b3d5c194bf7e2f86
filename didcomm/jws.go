package didcomm

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// jwsGeneral is the JWS General JSON Serialization DIDComm signed messages
// use (RFC 7515 §7.2.1), with the signer's kid in the unprotected header
// as the spec's examples put it.
type jwsGeneral struct {
	Payload    string         `json:"payload"`
	Signatures []jwsSignature `json:"signatures"`
}

type jwsSignature struct {
	Protected string `json:"protected"`
	Signature string `json:"signature"`
	Header    struct {
		Kid string `json:"kid"`
	} `json:"header"`
}

// sign makes a DIDComm signed message of payload with go-jose. go-jose puts
// kid in the protected header and emits the flattened serialization for a
// single signature; DIDComm receivers (didcomm-rust among them) look for
// the general form with kid in the per-signature header, so the result is
// re-shaped: kid stays protected too, which only strengthens it.
func sign(payload []byte, s *SigningSecret) ([]byte, error) {
	opts := (&jose.SignerOptions{}).WithType(MediaTypeSigned)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: s.Key, KeyID: s.ID}}, opts)
	if err != nil {
		return nil, err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return nil, err
	}
	var flat struct {
		Payload   string `json:"payload"`
		Protected string `json:"protected"`
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal([]byte(obj.FullSerialize()), &flat); err != nil {
		return nil, err
	}
	sig := jwsSignature{Protected: flat.Protected, Signature: flat.Signature}
	sig.Header.Kid = s.ID
	return json.Marshal(jwsGeneral{Payload: flat.Payload, Signatures: []jwsSignature{sig}})
}

// verified is what verify learned: the payload and the kids that signed it.
type verified struct {
	payload []byte
	signers []string
}

// verify checks every signature of a JWS (general or flattened JSON) with
// EdDSA keys from the signer DIDs' authentication methods.
func verify(data []byte, resolver Resolver, maxSignatures int) (*verified, error) {
	obj, err := jose.ParseSignedJSON(string(data), []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, problemf(CodeMalformed, "JWS: %v", err)
	}
	if len(obj.Signatures) == 0 || len(obj.Signatures) > maxSignatures {
		return nil, problemf(CodeMalformed, "JWS has %d signatures (1..%d allowed)", len(obj.Signatures), maxSignatures)
	}
	v := &verified{}
	for i, sig := range obj.Signatures {
		if typ, ok := sig.Protected.ExtraHeaders[jose.HeaderType]; ok && typ != MediaTypeSigned {
			return nil, problemf(CodeMalformed, "JWS typ %v", typ)
		}
		kid := sig.Header.KeyID
		if kid == "" {
			return nil, problemf(CodeMalformed, "signature %d has no kid", i)
		}
		ks, err := resolver.Resolve(didOf(kid))
		if err != nil {
			return nil, &Problem{Code: CodeUnresolvable, Err: err}
		}
		var pub ed25519.PublicKey
		for _, k := range ks.Authentication {
			if k.ID == kid {
				pub = k.Key
			}
		}
		if pub == nil {
			return nil, problemf(CodeUnresolvable, "signer %s is not an authentication key of %s", kid, ks.DID)
		}
		one := *obj
		one.Signatures = []jose.Signature{sig}
		payload, err := one.Verify(pub)
		if err != nil {
			return nil, problemf(CodeCrypto, "signature by %s: %v", kid, err)
		}
		v.payload = payload
		v.signers = append(v.signers, kid)
	}
	return v, nil
}

func signingSecret(s *Secrets) (*SigningSecret, error) {
	if s == nil || s.Signing == nil {
		return nil, fmt.Errorf("no signing key")
	}
	return s.Signing, nil
}
