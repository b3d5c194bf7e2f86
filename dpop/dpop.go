package dpop

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"fleetmesh.org/fleetmesh/identity"
)

// Header is the request header a proof travels in.
const Header = "DPoP"

// Type is the proof's typ header.
const Type = "dpop+jwt"

// Bounds of a proof.
const (
	// DefaultWindow is how far a proof's iat may be from the checker's
	// clock, either way: a proof is made just before its request, so
	// this is the clocks' disagreement a phone may have.
	DefaultWindow = 5 * time.Minute
	// MaxProofBytes bounds the header; a proof is about 400 bytes.
	MaxProofBytes = 2048
	// maxSeen bounds the remembered jti values; proofs beyond it within
	// one window are refused until older ones expire.
	maxSeen = 1 << 16
)

// claims are RFC 9449 §4.2's.
type claims struct {
	JTI string `json:"jti"`
	HTM string `json:"htm"`
	HTU string `json:"htu"`
	IAT int64  `json:"iat"`
}

// Proof returns a DPoP proof by key for a request of method to uri,
// made at now.
func Proof(key *identity.Key, method, uri string, now time.Time) (string, error) {
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims{JTI: base64.RawURLEncoding.EncodeToString(jti[:]), HTM: method, HTU: stripURI(uri), IAT: now.Unix()})
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key.PrivateKey()},
		(&jose.SignerOptions{EmbedJWK: true}).WithType(Type))
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// stripURI drops the query and fragment, as htu has neither.
func stripURI(uri string) string {
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		return uri[:i]
	}
	return uri
}

// ErrInvalid wraps every reason a proof is refused.
var ErrInvalid = errors.New("invalid DPoP proof")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Verifier checks proofs and remembers their jti. Its methods are safe
// for concurrent use.
type Verifier struct {
	// URLs are the server's own URLs besides the one a request names in
	// its Host header and path (the configured public URL, when a proxy
	// in front rewrites Host).
	URLs []string
	// Window is how far iat may be from now; 0 is DefaultWindow.
	Window time.Duration
	// Allow, if set, refuses a DID the server will not attribute a
	// connection to, with an error saying why and what to do.
	Allow func(did string) error
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu   sync.Mutex
	seen map[string]int64 // DID \0 jti → when it may be forgotten (Unix s)
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) window() time.Duration {
	if v.Window > 0 {
		return v.Window
	}
	return DefaultWindow
}

// Check returns the DID a request's proof names: "" with no error when
// the request carries none, an error wrapping ErrInvalid when its proof
// does not hold.
func (v *Verifier) Check(r *http.Request) (string, error) {
	vals := r.Header.Values(Header)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", invalid("%d DPoP headers; send one", len(vals))
	}
	return v.check(vals[0], r.Method, r.Host, r.URL.Path)
}

// check verifies proof for a request of method to host and path.
func (v *Verifier) check(proof, method, host, path string) (string, error) {
	if len(proof) > MaxProofBytes {
		return "", invalid("proof of %d bytes, over %d", len(proof), MaxProofBytes)
	}
	obj, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return "", invalid("not a compact JWS signed EdDSA: %v", err)
	}
	if len(obj.Signatures) != 1 {
		return "", invalid("%d signatures, want 1", len(obj.Signatures))
	}
	h := obj.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != Type {
		return "", invalid("typ %q, want %q", typ, Type)
	}
	if h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		return "", invalid("the header has no public jwk")
	}
	pub, ok := h.JSONWebKey.Key.(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return "", invalid("the jwk is not an Ed25519 key")
	}
	payload, err := obj.Verify(pub)
	if err != nil {
		return "", invalid("signature: %v", err)
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", invalid("claims: %v", err)
	}
	if c.JTI == "" || len(c.JTI) > 64 {
		return "", invalid("jti must be 1 to 64 characters")
	}
	if c.HTM != method {
		return "", invalid("htm %q, but the request is %s", c.HTM, method)
	}
	if !v.ownURL(c.HTU, host, path) {
		return "", invalid("htu %q does not name this server (%s%s)", c.HTU, host, path)
	}
	now, win := v.now().Unix(), int64(v.window()/time.Second)
	if d := now - c.IAT; d > win || -d > win {
		return "", invalid("iat is %d s from this server's clock, more than %d s; check the device clock", d, win)
	}
	did := identity.DIDFromPublicKey(pub)
	if v.Allow != nil {
		if err := v.Allow(did); err != nil {
			return "", fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	if err := v.remember(did+"\x00"+c.JTI, c.IAT+win, now); err != nil {
		return "", err
	}
	return did, nil
}

// remember records a proof's jti until it could no longer pass, refusing
// one seen before.
func (v *Verifier) remember(key string, until, now int64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string]int64{}
	}
	if _, dup := v.seen[key]; dup {
		return invalid("jti used before: make a new proof for each request")
	}
	if len(v.seen) >= maxSeen {
		for k, t := range v.seen {
			if t < now {
				delete(v.seen, k)
			}
		}
		if len(v.seen) >= maxSeen {
			return fmt.Errorf("dpop: %d proofs within the window; retry later", maxSeen)
		}
	}
	v.seen[key] = until
	return nil
}

// ownURL compares htu with the request's host and path and with the
// configured URLs, ignoring the scheme (a proxy may terminate TLS) and a
// trailing slash.
func (v *Verifier) ownURL(htu, host, path string) bool {
	u, err := url.Parse(htu)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	norm := func(host, path string) string { return strings.ToLower(host) + strings.TrimSuffix(path, "/") }
	got := norm(u.Host, u.Path)
	if got == norm(host, path) {
		return true
	}
	for _, s := range v.URLs {
		if cu, err := url.Parse(s); err == nil && got == norm(cu.Host, cu.Path) {
			return true
		}
	}
	return false
}

// Identify is the relay's Identify hook: the DID a WebSocket upgrade's
// proof names ("" when it has none), or false after answering a request
// whose proof does not hold with 401 and a DPoP challenge (RFC 9449
// §7.1) saying why.
func (v *Verifier) Identify(w http.ResponseWriter, r *http.Request) (string, bool) {
	did, err := v.Check(r)
	if err == nil {
		return did, true
	}
	desc := strings.NewReplacer(`"`, "'", "\\", "/").Replace(err.Error())
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`DPoP algs="EdDSA", error="invalid_dpop_proof", error_description="%s"`, desc))
	w.Header().Set("Connection", "close")
	http.Error(w, "invalid: "+err.Error(), http.StatusUnauthorized)
	return "", false
}
