package identity

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mr-tron/base58"
)

// The did:key specification's Ed25519 vector (w3c-ccg/did-method-key,
// test-vectors/ed25519-x25519.json): the all-zero seed.
const (
	zeroSeedDID = "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp"
	zeroSeedKA  = "z6LShs9GGnqk85isEBzzshkuVWrVKsRp24GnDuHk8QWkARMW"
)

func TestSpecVectorZeroSeed(t *testing.T) {
	k, err := KeyFromSeed(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.DID(); got != zeroSeedDID {
		t.Fatalf("DID = %s, want %s", got, zeroSeedDID)
	}
	doc, err := Resolve(k.DID())
	if err != nil {
		t.Fatal(err)
	}
	if want := zeroSeedDID + "#" + zeroSeedKA; doc.KeyAgreement[0] != want {
		t.Fatalf("keyAgreement = %s, want %s", doc.KeyAgreement[0], want)
	}
	if doc.VerificationMethod[1].PublicKeyMultibase != zeroSeedKA {
		t.Fatalf("X25519 multibase = %s", doc.VerificationMethod[1].PublicKeyMultibase)
	}
	if !strings.HasPrefix(k.PeerID().String(), "12D3KooW") {
		t.Fatalf("PeerID %s does not have the Ed25519 identity-multihash prefix", k.PeerID())
	}
}

func TestX25519PrivateMatchesPublic(t *testing.T) {
	for i := 0; i < 20; i++ {
		k, err := GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		pub, err := X25519PublicFromEd25519(k.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		fromPriv, err := x25519Base(k.X25519Private())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pub, fromPriv) {
			t.Fatalf("derived X25519 public key %x != scalar*base %x", pub, fromPriv)
		}
	}
}

func TestNamesRoundTrip(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := PeerIDFromDID(k.DID())
	if err != nil || pid != k.PeerID() {
		t.Fatalf("PeerIDFromDID = %s, %v; want %s", pid, err, k.PeerID())
	}
	did, err := DIDFromPeerID(k.PeerID())
	if err != nil || did != k.DID() {
		t.Fatalf("DIDFromPeerID = %s, %v; want %s", did, err, k.DID())
	}
	pub, err := PublicKeyFromEndpointID(k.EndpointID())
	if err != nil || !bytes.Equal(pub, k.PublicKey()) {
		t.Fatalf("EndpointID round trip: %v", err)
	}
	if len(k.EndpointID()) != 64 {
		t.Fatalf("EndpointID %q is not 64 hex characters", k.EndpointID())
	}
}

func TestParseErrors(t *testing.T) {
	k, _ := KeyFromSeed(make([]byte, 32))
	xMB := MultibaseX25519(make([]byte, 32))
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"did:web:example.org", ErrNotDIDKey},
		{"did:key:f00", ErrNotMultibase},
		{"did:key:z0OIl", ErrNotMultibase},
		{"did:key:" + xMB, ErrWrongCodec},
		{"did:key:z" + base58.Encode([]byte{0xed, 0x01, 1, 2, 3}), ErrWrongKeyLen},
		{k.DID() + "#frag", nil},
	} {
		_, err := PublicKeyFromDID(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("PublicKeyFromDID(%q) = %v, want %v", tc.in, err, tc.want)
		}
	}
	if _, err := PublicKeyFromEndpointID("zz"); !errors.Is(err, ErrBadEndpointID) {
		t.Errorf("bad endpoint id: %v", err)
	}
}

func TestKeyFileNeverOverwritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "node.key")
	k1, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first LoadOrCreateKey: created=%v err=%v", created, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != KeyFileMode {
		t.Fatalf("key file mode %o, want %o", st.Mode().Perm(), KeyFileMode)
	}
	before, _ := os.ReadFile(path)
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created {
		t.Fatalf("second LoadOrCreateKey: created=%v err=%v", created, err)
	}
	after, _ := os.ReadFile(path)
	if k1.DID() != k2.DID() || !bytes.Equal(before, after) {
		t.Fatal("key changed on second load")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(path); !errors.Is(err, ErrKeyFilePermissions) {
		t.Fatalf("world-readable key loaded: %v", err)
	}
	if _, _, err := LoadOrCreateKey(path); !errors.Is(err, ErrKeyFilePermissions) {
		t.Fatalf("LoadOrCreateKey on world-readable key: %v (must not replace it)", err)
	}
}

func FuzzPublicKeyFromDID(f *testing.F) {
	f.Add(zeroSeedDID)
	f.Add("did:key:z6LShs9GGnqk85isEBzzshkuVWrVKsRp24GnDuHk8QWkARMW")
	f.Add("did:key:")
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := PublicKeyFromDID(s)
		if err != nil {
			return
		}
		again, err := PublicKeyFromDID(DIDFromPublicKey(pub))
		if err != nil || !bytes.Equal(pub, again) {
			t.Fatalf("round trip of %q failed: %v", s, err)
		}
	})
}
