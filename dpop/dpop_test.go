package dpop

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"fleetmesh.org/fleetmesh/identity"
)

func upgrade(target string, proofs ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for _, p := range proofs {
		r.Header.Add(Header, p)
	}
	return r
}

func mustProof(t testing.TB, k *identity.Key, method, uri string, at time.Time) string {
	t.Helper()
	p, err := Proof(k, method, uri, at)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signWith signs claims JSON with header options of the test's choosing.
func signWith(t *testing.T, alg jose.SignatureAlgorithm, key any, typ string, payload string) string {
	t.Helper()
	opts := &jose.SignerOptions{EmbedJWK: true}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheck(t *testing.T) {
	k, _ := identity.GenerateKey()
	other, _ := identity.GenerateKey()
	now := time.Unix(1_800_000_000, 0)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	const target = "http://relay.example:7447/"
	good := mustProof(t, k, "GET", "ws://relay.example:7447/", now)
	tampered := good[:len(good)-4] + "AAAA"
	if tampered == good {
		tampered = good[:len(good)-4] + "BBBB"
	}
	for _, tc := range []struct {
		name    string
		req     *http.Request
		allow   func(string) error
		wantDID string
		wantErr string
	}{
		{name: "valid", req: upgrade(target, good), wantDID: k.DID()},
		{name: "no proof is anonymous", req: upgrade(target)},
		{name: "wss and no slash", req: upgrade(target, mustProof(t, k, "GET", "wss://RELAY.example:7447", now)), wantDID: k.DID()},
		{name: "configured public URL", req: upgrade("http://10.0.0.1:7447/", mustProof(t, k, "GET", "wss://relay.example:7447/", now)), wantDID: k.DID()},
		{name: "two proofs", req: upgrade(target, good, good), wantErr: "2 DPoP headers"},
		{name: "other host", req: upgrade(target, mustProof(t, k, "GET", "ws://elsewhere:7447/", now)), wantErr: "does not name this server"},
		{name: "other path", req: upgrade(target, mustProof(t, k, "GET", "ws://relay.example:7447/didcomm", now)), wantErr: "does not name this server"},
		{name: "other method", req: upgrade(target, mustProof(t, k, "POST", "ws://relay.example:7447/", now)), wantErr: "htm"},
		{name: "stale", req: upgrade(target, mustProof(t, k, "GET", "ws://relay.example:7447/", now.Add(-DefaultWindow-time.Second))), wantErr: "check the device clock"},
		{name: "future", req: upgrade(target, mustProof(t, k, "GET", "ws://relay.example:7447/", now.Add(DefaultWindow+time.Second))), wantErr: "check the device clock"},
		{name: "tampered signature", req: upgrade(target, tampered), wantErr: "signature"},
		{name: "not a JWS", req: upgrade(target, "not.a.jws"), wantErr: "compact JWS"},
		{name: "wrong typ", req: upgrade(target, signWith(t, jose.EdDSA, k.PrivateKey(), "JWT", `{"jti":"a","htm":"GET","htu":"ws://relay.example:7447/","iat":1800000000}`)), wantErr: "typ"},
		{name: "ES256", req: upgrade(target, signWith(t, jose.ES256, ec, Type, `{"jti":"a","htm":"GET","htu":"ws://relay.example:7447/","iat":1800000000}`)), wantErr: "compact JWS signed EdDSA"},
		{name: "no jti", req: upgrade(target, signWith(t, jose.EdDSA, k.PrivateKey(), Type, `{"htm":"GET","htu":"ws://relay.example:7447/","iat":1800000000}`)), wantErr: "jti"},
		{name: "too long", req: upgrade(target, strings.Repeat("a", MaxProofBytes+1)), wantErr: "over"},
		{name: "refused DID", req: upgrade(target, mustProof(t, other, "GET", "ws://relay.example:7447/", now)),
			allow: func(did string) error {
				if did == other.DID() {
					return errors.New("not mediated here")
				}
				return nil
			}, wantErr: "not mediated here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verifier{URLs: []string{"wss://relay.example:7447/"}, Allow: tc.allow, Now: func() time.Time { return now }}
			did, err := v.Check(tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || did != tc.wantDID {
				t.Fatalf("got %q, %v; want %q", did, err, tc.wantDID)
			}
		})
	}
}

// A proof passes once: the same jti again is a replay.
func TestReplayRefused(t *testing.T) {
	k, _ := identity.GenerateKey()
	v := &Verifier{}
	p := mustProof(t, k, "GET", "ws://relay.example/", time.Now())
	if _, err := v.Check(upgrade("http://relay.example/", p)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(upgrade("http://relay.example/", p)); err == nil || !strings.Contains(err.Error(), "jti used before") {
		t.Fatalf("replay: %v", err)
	}
	if _, err := v.Check(upgrade("http://relay.example/", mustProof(t, k, "GET", "ws://relay.example/", time.Now()))); err != nil {
		t.Fatalf("a new proof: %v", err)
	}
}

// Identify answers a bad proof with 401 and a DPoP challenge naming the
// reason, and lets a request without one through anonymously.
func TestIdentify(t *testing.T) {
	v := &Verifier{}
	w := httptest.NewRecorder()
	if did, ok := v.Identify(w, upgrade("http://relay.example/")); !ok || did != "" {
		t.Fatalf("anonymous: %q %v", did, ok)
	}
	w = httptest.NewRecorder()
	if _, ok := v.Identify(w, upgrade("http://relay.example/", "x")); ok {
		t.Fatal("a bad proof passed")
	}
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_dpop_proof"`) {
		t.Fatalf("refusal: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
}
