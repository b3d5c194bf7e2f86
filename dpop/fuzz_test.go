package dpop

import (
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// FuzzCheck: any header value is a DID or an error, never a panic, and a
// proof that passes names the did:key of a valid Ed25519 key.
func FuzzCheck(f *testing.F) {
	k, _ := identity.GenerateKey()
	now := time.Now()
	f.Add(mustProof(f, k, "GET", "ws://relay.example/", now))
	f.Add("eyJhbGciOiJFZERTQSJ9.e30.AAAA")
	f.Add("..")
	f.Add("")
	f.Fuzz(func(t *testing.T, proof string) {
		v := &Verifier{Now: func() time.Time { return now }}
		did, err := v.check(proof, "GET", "relay.example", "/")
		if err != nil {
			return
		}
		if !strings.HasPrefix(did, "did:key:") {
			t.Fatalf("passed with DID %q", did)
		}
		if _, err := identity.PublicKeyFromDID(did); err != nil {
			t.Fatalf("passed with a DID that does not resolve: %v", err)
		}
	})
}
