package didcomm

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	josecipher "github.com/go-jose/go-jose/v4/cipher"
	"golang.org/x/crypto/chacha20poly1305"
)

// Key-management algorithms ("alg").
const (
	AlgAnon = "ECDH-ES+A256KW"
	AlgAuth = "ECDH-1PU+A256KW"
)

// Content-encryption algorithms ("enc").
const (
	EncA256CBCHS512 = "A256CBC-HS512"
	EncA256GCM      = "A256GCM"
	EncXC20P        = "XC20P"
)

// contentCipher returns the AEAD and key size of an "enc" value.
func contentCipher(enc string, key []byte) (cipher.AEAD, error) {
	switch enc {
	case EncA256CBCHS512:
		if len(key) != 64 {
			return nil, errors.New("A256CBC-HS512 needs a 64-byte key")
		}
		return josecipher.NewCBCHMAC(key, aes.NewCipher)
	case EncA256GCM:
		if len(key) != 32 {
			return nil, errors.New("A256GCM needs a 32-byte key")
		}
		b, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(b)
	case EncXC20P:
		return chacha20poly1305.NewX(key)
	}
	return nil, fmt.Errorf("unsupported enc %q", enc)
}

// tagSize is the authentication tag length of an "enc" value. (go-jose's
// CBC-HMAC reports the padding in Overhead, so it cannot be used here.)
func tagSize(enc string) int {
	if enc == EncA256CBCHS512 {
		return 32
	}
	return 16
}

func cekSize(enc string) (int, error) {
	switch enc {
	case EncA256CBCHS512:
		return 64, nil
	case EncA256GCM, EncXC20P:
		return 32, nil
	}
	return 0, fmt.Errorf("unsupported enc %q", enc)
}

// kwKeySize is the KEK size of an "alg" value: A256KW everywhere DIDComm
// uses it; A128KW appears only in the ECDH-1PU draft's vector.
func kwKeySize(alg string) (int, error) {
	switch {
	case strings.HasSuffix(alg, "+A256KW"):
		return 32, nil
	case strings.HasSuffix(alg, "+A128KW"):
		return 16, nil
	}
	return 0, fmt.Errorf("unsupported alg %q", alg)
}

// sealContent encrypts plaintext with the CEK; AAD is the ASCII of the
// base64url protected header (RFC 7516 §5.1 step 14).
func sealContent(enc string, cek, iv, aad, plaintext []byte) (ciphertext, tag []byte, err error) {
	a, err := contentCipher(enc, cek)
	if err != nil {
		return nil, nil, err
	}
	if len(iv) != a.NonceSize() {
		return nil, nil, fmt.Errorf("iv is %d bytes, %s needs %d", len(iv), enc, a.NonceSize())
	}
	out := a.Seal(nil, iv, plaintext, aad)
	n := len(out) - tagSize(enc)
	return out[:n], out[n:], nil
}

func openContent(enc string, cek, iv, aad, ciphertext, tag []byte) ([]byte, error) {
	a, err := contentCipher(enc, cek)
	if err != nil {
		return nil, err
	}
	if len(iv) != a.NonceSize() || len(tag) != tagSize(enc) {
		return nil, fmt.Errorf("iv or tag has the wrong length for %s", enc)
	}
	return a.Open(nil, iv, append(append([]byte{}, ciphertext...), tag...), aad)
}

func lengthPrefixed(b []byte) []byte {
	out := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(out, uint32(len(b)))
	copy(out[4:], b)
	return out
}

// deriveKEK runs the Concat KDF of RFC 7518 §4.6.2 over Z. For ECDH-1PU in
// key-wrapping mode, draft-madden-jose-ecdh-1pu-04 §2.3 appends the content
// tag (length-prefixed) to SuppPubInfo, which binds the wrapped key to this
// ciphertext: tag is nil for ECDH-ES.
func deriveKEK(alg string, z, apu, apv, tag []byte) ([]byte, error) {
	size, err := kwKeySize(alg)
	if err != nil {
		return nil, err
	}
	pub := make([]byte, 4)
	binary.BigEndian.PutUint32(pub, uint32(size*8))
	if tag != nil {
		pub = append(pub, lengthPrefixed(tag)...)
	}
	kdf := josecipher.NewConcatKDF(crypto.SHA256, z, lengthPrefixed([]byte(alg)), lengthPrefixed(apu), lengthPrefixed(apv), pub, nil)
	kek := make([]byte, size)
	if _, err := io.ReadFull(kdf, kek); err != nil {
		return nil, err
	}
	return kek, nil
}

func wrap(kek, cek []byte) ([]byte, error) {
	b, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	return josecipher.KeyWrap(b, cek)
}

func unwrap(kek, wrapped []byte) ([]byte, error) {
	b, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	return josecipher.KeyUnwrap(b, wrapped)
}

// sharedZ computes Z: Ze for ECDH-ES; Ze ‖ Zs for ECDH-1PU, where Zs is the
// agreement between the sender's static key and the recipient's.
func sharedZ(ephemeral *ecdh.PrivateKey, recipient *ecdh.PublicKey, senderStatic *ecdh.PrivateKey) ([]byte, error) {
	ze, err := ephemeral.ECDH(recipient)
	if err != nil {
		return nil, err
	}
	if senderStatic == nil {
		return ze, nil
	}
	zs, err := senderStatic.ECDH(recipient)
	if err != nil {
		return nil, err
	}
	return append(ze, zs...), nil
}

// recipientZ is sharedZ from the recipient's side.
func recipientZ(mine *ecdh.PrivateKey, epk, senderStatic *ecdh.PublicKey) ([]byte, error) {
	ze, err := mine.ECDH(epk)
	if err != nil {
		return nil, err
	}
	if senderStatic == nil {
		return ze, nil
	}
	zs, err := mine.ECDH(senderStatic)
	if err != nil {
		return nil, err
	}
	return append(ze, zs...), nil
}

// apvFor is the spec's apv: SHA-256 over the recipient kids, sorted and
// joined with ".".
func apvFor(kids []string) []byte {
	sorted := append([]string{}, kids...)
	sort.Strings(sorted)
	h := sha256.Sum256([]byte(strings.Join(sorted, ".")))
	return h[:]
}

// jweHeader is the protected header of a DIDComm JWE.
type jweHeader struct {
	Typ  string          `json:"typ,omitempty"`
	Alg  string          `json:"alg"`
	Enc  string          `json:"enc"`
	Skid string          `json:"skid,omitempty"`
	Apu  string          `json:"apu,omitempty"`
	Apv  string          `json:"apv"`
	Epk  json.RawMessage `json:"epk"`
}

type jweRecipient struct {
	Header struct {
		Kid string `json:"kid"`
	} `json:"header"`
	EncryptedKey string `json:"encrypted_key"`
}

type jweJSON struct {
	Protected  string         `json:"protected"`
	Recipients []jweRecipient `json:"recipients"`
	IV         string         `json:"iv"`
	Ciphertext string         `json:"ciphertext"`
	Tag        string         `json:"tag"`
}

// encrypt builds a JWE of payload for recipients, anoncrypt when sender is
// nil and authcrypt otherwise. All recipients must use the sender's curve
// (and each other's): the single epk is on that curve.
func encrypt(payload []byte, recipients []AgreementKey, sender *AgreementSecret, enc string, random io.Reader) ([]byte, error) {
	if len(recipients) == 0 {
		return nil, errors.New("no recipient keys")
	}
	curve := recipients[0].Key.Curve()
	for _, r := range recipients {
		if r.Key.Curve() != curve {
			return nil, fmt.Errorf("recipient %s is on another curve than %s", r.ID, recipients[0].ID)
		}
	}
	alg := AlgAnon
	if sender != nil {
		alg = AlgAuth
		if sender.Key.Curve() != curve {
			return nil, fmt.Errorf("sender key %s is not on the recipients' curve", sender.ID)
		}
		if enc != EncA256CBCHS512 {
			return nil, fmt.Errorf("authcrypt requires %s, not %s", EncA256CBCHS512, enc)
		}
	}
	n, err := cekSize(enc)
	if err != nil {
		return nil, err
	}
	epk, err := curve.GenerateKey(random)
	if err != nil {
		return nil, err
	}
	cek := make([]byte, n)
	if _, err := io.ReadFull(random, cek); err != nil {
		return nil, err
	}
	a, err := contentCipher(enc, cek)
	if err != nil {
		return nil, err
	}
	iv := make([]byte, a.NonceSize())
	if _, err := io.ReadFull(random, iv); err != nil {
		return nil, err
	}
	kids := make([]string, len(recipients))
	for i, r := range recipients {
		kids[i] = r.ID
	}
	epkJSON, err := json.Marshal(publicJWK(epk.PublicKey()))
	if err != nil {
		return nil, err
	}
	h := jweHeader{Typ: MediaTypeEncrypted, Alg: alg, Enc: enc, Apv: b64.EncodeToString(apvFor(kids)), Epk: epkJSON}
	var apu []byte
	var static *ecdh.PrivateKey
	if sender != nil {
		h.Skid = sender.ID
		apu = []byte(sender.ID)
		h.Apu = b64.EncodeToString(apu)
		static = sender.Key
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	protected := b64.EncodeToString(hj)
	ct, tag, err := sealContent(enc, cek, iv, []byte(protected), payload)
	if err != nil {
		return nil, err
	}
	var kdfTag []byte
	if sender != nil {
		kdfTag = tag
	}
	out := jweJSON{Protected: protected, IV: b64.EncodeToString(iv), Ciphertext: b64.EncodeToString(ct), Tag: b64.EncodeToString(tag)}
	apv := apvFor(kids)
	for _, r := range recipients {
		z, err := sharedZ(epk, r.Key, static)
		if err != nil {
			return nil, fmt.Errorf("key agreement with %s: %w", r.ID, err)
		}
		kek, err := deriveKEK(alg, z, apu, apv, kdfTag)
		if err != nil {
			return nil, err
		}
		wk, err := wrap(kek, cek)
		if err != nil {
			return nil, err
		}
		var rec jweRecipient
		rec.Header.Kid = r.ID
		rec.EncryptedKey = b64.EncodeToString(wk)
		out.Recipients = append(out.Recipients, rec)
	}
	return json.Marshal(out)
}

// decrypted is what decrypt learned besides the payload.
type decrypted struct {
	payload      []byte
	alg, enc     string
	senderKID    string // skid, authcrypt only
	recipientKID string
}

// decrypt opens a JWE with the first of our keys it is addressed to. For
// authcrypt it resolves the sender's key from skid.
func decrypt(j *jweJSON, secrets *Secrets, resolver Resolver, maxRecipients int) (*decrypted, error) {
	if len(j.Recipients) == 0 || len(j.Recipients) > maxRecipients {
		return nil, problemf(CodeMalformed, "JWE has %d recipients (1..%d allowed)", len(j.Recipients), maxRecipients)
	}
	hj, err := b64.DecodeString(j.Protected)
	if err != nil {
		return nil, problemf(CodeMalformed, "protected header: %v", err)
	}
	var h jweHeader
	if err := json.Unmarshal(hj, &h); err != nil {
		return nil, problemf(CodeMalformed, "protected header: %v", err)
	}
	if h.Typ != "" && h.Typ != MediaTypeEncrypted {
		return nil, problemf(CodeMalformed, "JWE typ %q", h.Typ)
	}
	var senderPub *ecdh.PublicKey
	var apu []byte
	switch h.Alg {
	case AlgAnon:
		if h.Skid != "" {
			return nil, problemf(CodeMalformed, "anoncrypt JWE carries skid")
		}
	case AlgAuth:
		if h.Enc != EncA256CBCHS512 {
			return nil, problemf(CodeCrypto, "authcrypt with enc %q (only %s is allowed)", h.Enc, EncA256CBCHS512)
		}
		if h.Apu == "" {
			return nil, problemf(CodeMalformed, "authcrypt JWE has no apu")
		}
		if apu, err = b64.DecodeString(h.Apu); err != nil {
			return nil, problemf(CodeMalformed, "apu: %v", err)
		}
		skid := h.Skid
		if skid == "" {
			skid = string(apu) // the spec lets apu stand in for a missing skid
		}
		if string(apu) != skid {
			return nil, problemf(CodeSenderMismatch, "apu %q does not name skid %q", apu, skid)
		}
		h.Skid = skid
		ks, err := resolver.Resolve(didOf(skid))
		if err != nil {
			return nil, &Problem{Code: CodeUnresolvable, Err: err}
		}
		for _, k := range ks.KeyAgreement {
			if k.ID == skid {
				senderPub = k.Key
			}
		}
		if senderPub == nil {
			return nil, problemf(CodeUnresolvable, "sender key %s is not a keyAgreement key of %s", skid, ks.DID)
		}
	default:
		return nil, problemf(CodeCrypto, "unsupported alg %q", h.Alg)
	}
	if _, err := cekSize(h.Enc); err != nil {
		return nil, problemf(CodeCrypto, "%v", err)
	}
	if len(h.Epk) == 0 {
		return nil, problemf(CodeMalformed, "JWE has no epk")
	}
	epk, err := PublicKeyFromJWK(h.Epk)
	if err != nil {
		return nil, problemf(CodeMalformed, "epk: %v", err)
	}
	if senderPub != nil && senderPub.Curve() != epk.Curve() {
		return nil, problemf(CodeCrypto, "sender key and epk are on different curves")
	}
	kids := make([]string, len(j.Recipients))
	for i, r := range j.Recipients {
		kids[i] = r.Header.Kid
	}
	apv, err := b64.DecodeString(h.Apv)
	if err != nil {
		return nil, problemf(CodeMalformed, "apv: %v", err)
	}
	if subtle.ConstantTimeCompare(apv, apvFor(kids)) != 1 {
		return nil, problemf(CodeCrypto, "apv does not match the recipient kids")
	}
	iv, err1 := b64.DecodeString(j.IV)
	ct, err2 := b64.DecodeString(j.Ciphertext)
	tag, err3 := b64.DecodeString(j.Tag)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, problemf(CodeMalformed, "iv, ciphertext or tag: %v", err)
	}
	var kdfTag []byte
	if h.Alg == AlgAuth {
		kdfTag = tag
	}
	found := false
	for _, r := range j.Recipients {
		mine := secrets.agreement(r.Header.Kid)
		if mine == nil {
			continue
		}
		found = true
		if mine.Key.Curve() != epk.Curve() {
			continue
		}
		wk, err := b64.DecodeString(r.EncryptedKey)
		if err != nil {
			return nil, problemf(CodeMalformed, "encrypted_key: %v", err)
		}
		z, err := recipientZ(mine.Key, epk, senderPub)
		if err != nil {
			return nil, problemf(CodeCrypto, "key agreement: %v", err)
		}
		kek, err := deriveKEK(h.Alg, z, apu, apv, kdfTag)
		if err != nil {
			return nil, problemf(CodeCrypto, "%v", err)
		}
		cek, err := unwrap(kek, wk)
		if err != nil {
			return nil, problemf(CodeCrypto, "unwrap key for %s: %v", r.Header.Kid, err)
		}
		pt, err := openContent(h.Enc, cek, iv, []byte(j.Protected), ct, tag)
		if err != nil {
			return nil, problemf(CodeCrypto, "decrypt: %v", err)
		}
		return &decrypted{payload: pt, alg: h.Alg, enc: h.Enc, senderKID: h.Skid, recipientKID: r.Header.Kid}, nil
	}
	if !found {
		return nil, problemf(CodeNotRecipient, "none of the %d recipient keys is ours", len(j.Recipients))
	}
	return nil, problemf(CodeCrypto, "no recipient key on the epk's curve")
}
