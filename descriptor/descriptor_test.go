package descriptor

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

var testNow = time.Unix(1_800_000_000, 0)

func testKey(t testing.TB, b byte) *identity.Key {
	t.Helper()
	seed := make([]byte, 32)
	seed[0] = b
	k, err := identity.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sample is a descriptor that uses every field.
func sample(k *identity.Key) Descriptor {
	return Descriptor{
		DID:      k.DID(),
		Class:    ClassAnchor,
		Seq:      7,
		IssuedAt: testNow.Unix() - 60,
		Expires:  testNow.Unix() + 3600,
		Addresses: Addresses{
			Libp2p: []string{
				"/ip4/198.51.100.7/tcp/4001",
				"/ip6/2001:db8::1/udp/4001/quic-v1/p2p/" + k.PeerID().String(),
				// Reachable through a circuit relay v2 relay.
				"/ip4/203.0.113.9/tcp/4001/p2p/12D3KooWGzh9oRGr4PKbYFbXTBnPVHNVKvpu5uhcEyfQ3chVozv2/p2p-circuit/p2p/" + k.PeerID().String(),
			},
			Relays: []string{"wss://relay.example.org/", "ws://127.0.0.1:7447"},
			Iroh: &IrohAddr{
				EndpointID: k.EndpointID(),
				RelayURL:   "https://iroh-relay.example.org",
				Direct:     []string{"198.51.100.7:11204", "[2001:db8::1]:11204"},
			},
		},
		Protocols: []string{"nostr/nip-01", "https://didcomm.org/trust-ping/2.0", "/fleetmesh/sync/1.0.0"},
		Offers: Offers{
			Storage:      &StorageOffer{MaxBytes: 10 << 30, RetentionSeconds: 90 * 86400},
			CircuitRelay: &CircuitRelayOffer{MaxReservations: 128, MaxCircuitSeconds: 120, MaxCircuitBytes: 1 << 17},
			Mediation:    &MediationOffer{MaxRecipients: 1000, MaxQueueMessages: 10000, MaxQueueBytes: 64 << 20},
			Compute:      &ComputeOffer{MaxConcurrentJobs: 2, MaxFuel: 1e9, MaxMemoryBytes: 256 << 20},
		},
	}
}

// rawJWS builds a compact JWS by hand from any header and payload, to craft
// inputs the library signer would never produce.
func rawJWS(k *identity.Key, header, payload string) []byte {
	enc := base64.RawURLEncoding
	input := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	return []byte(input + "." + enc.EncodeToString(ed25519.Sign(k.PrivateKey(), []byte(input))))
}

func header(k *identity.Key) string {
	kid, _ := identity.SigningKeyID(k.DID())
	return `{"alg":"EdDSA","kid":"` + kid + `","typ":"` + Type + `"}`
}

func payloadOf(t *testing.T, d Descriptor) string {
	t.Helper()
	d.V = Version
	b, err := json.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSignVerifyRoundTrip(t *testing.T) {
	k := testKey(t, 1)
	lim := DefaultLimits()
	s, err := Sign(k, sample(k), lim)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(s.JWS, testNow, lim)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got.Descriptor)
	want := sample(k)
	want.V = Version
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("round trip changed the descriptor:\n got %s\nwant %s", a, b)
	}
	if !got.CID.Equals(s.CID) || !got.CID.Equals(CIDOf(s.JWS)) {
		t.Fatalf("CID %s != %s", got.CID, s.CID)
	}
	if !strings.HasPrefix(s.CID.String(), "bafkrei") {
		t.Fatalf("CID %s is not CIDv1 raw sha2-256 (bafkrei…)", s.CID)
	}
	// Ed25519 is deterministic, so the same descriptor has the same CID.
	again, err := Sign(k, sample(k), lim)
	if err != nil || !again.CID.Equals(s.CID) {
		t.Fatalf("re-signing gave CID %v (%v), want %s", again.CID, err, s.CID)
	}
	// The envelope is a standard JWS: check the header a JOSE library reads.
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.Split(string(s.JWS), ".")[0])
	var h map[string]string
	if err := json.Unmarshal(hdr, &h); err != nil {
		t.Fatal(err)
	}
	kid, _ := identity.SigningKeyID(k.DID())
	if h["alg"] != "EdDSA" || h["typ"] != Type || h["kid"] != kid {
		t.Fatalf("JWS header %s", hdr)
	}
}

func TestVerifyRejects(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	lim := DefaultLimits()
	good, err := Sign(k, sample(k), lim)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(good.JWS), ".")
	with := func(f func(*Descriptor)) []byte {
		d := sample(k)
		f(&d)
		return rawJWS(k, header(k), payloadOf(t, d))
	}
	replacePayload := func(p string) []byte {
		return []byte(parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(p)) + "." + parts[2])
	}
	tampered := sample(k)
	tampered.Class = ClassLeaf
	otherSigned := sample(k)
	otherSigned.Seq = 8

	for _, tc := range []struct {
		name string
		raw  []byte
		want error
	}{
		{"tampered payload", replacePayload(payloadOf(t, tampered)), ErrBadSignature},
		{"tampered signature", []byte(parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 64))), ErrBadSignature},
		{"signed by other key, kid of the DID", rawJWS(other, header(k), payloadOf(t, otherSigned)), ErrBadSignature},
		{"signed by other key, honest kid", rawJWS(other, header(other), payloadOf(t, otherSigned)), ErrWrongSigner},
		{"expired", with(func(d *Descriptor) { d.IssuedAt, d.Expires = testNow.Unix()-7200, testNow.Unix() }), ErrExpired},
		{"not yet valid", with(func(d *Descriptor) { d.IssuedAt, d.Expires = testNow.Unix()+3600, testNow.Unix()+7200 }), ErrNotYetValid},
		{"exp before iat", with(func(d *Descriptor) { d.Expires = d.IssuedAt }), ErrBadValidity},
		{"lifetime too long", with(func(d *Descriptor) { d.Expires = d.IssuedAt + 31*86400 }), ErrBadValidity},
		{"seq zero", with(func(d *Descriptor) { d.Seq = 0 }), ErrBadValidity},
		{"seq beyond 2^53-1", with(func(d *Descriptor) { d.Seq = MaxSeq + 1 }), ErrBadValidity},
		{"unknown class", with(func(d *Descriptor) { d.Class = "server" }), ErrUnknownClass},
		{"empty class", with(func(d *Descriptor) { d.Class = "" }), ErrUnknownClass},
		{"multiaddr garbage", with(func(d *Descriptor) { d.Addresses.Libp2p = []string{"/ip4/300.1.1.1/tcp/1"} }), ErrBadAddress},
		{"multiaddr not canonical", with(func(d *Descriptor) { d.Addresses.Libp2p = []string{"/ip4/1.2.3.4/tcp/01"} }), ErrBadAddress},
		{"multiaddr of another peer", with(func(d *Descriptor) {
			d.Addresses.Libp2p = []string{"/ip4/1.2.3.4/tcp/1/p2p/" + other.PeerID().String()}
		}), ErrBadAddress},
		{"multiaddr through a relay of another peer", with(func(d *Descriptor) {
			d.Addresses.Libp2p = []string{"/ip4/1.2.3.4/tcp/1/p2p/" + k.PeerID().String() + "/p2p-circuit/p2p/" + other.PeerID().String()}
		}), ErrBadAddress},
		{"circuit without its relay", with(func(d *Descriptor) {
			d.Addresses.Libp2p = []string{"/ip4/1.2.3.4/tcp/1/p2p-circuit/p2p/" + k.PeerID().String()}
		}), ErrBadAddress},
		{"circuit through itself", with(func(d *Descriptor) {
			d.Addresses.Libp2p = []string{"/ip4/1.2.3.4/tcp/1/p2p/" + k.PeerID().String() + "/p2p-circuit"}
		}), ErrBadAddress},
		{"chained circuits", with(func(d *Descriptor) {
			d.Addresses.Libp2p = []string{"/ip4/1.2.3.4/tcp/1/p2p/" + other.PeerID().String() + "/p2p-circuit/p2p/" + other.PeerID().String() + "/p2p-circuit"}
		}), ErrBadAddress},
		{"relay not ws", with(func(d *Descriptor) { d.Addresses.Relays = []string{"https://relay.example.org"} }), ErrBadAddress},
		{"relay with credentials", with(func(d *Descriptor) { d.Addresses.Relays = []string{"wss://u:p@relay.example.org"} }), ErrBadAddress},
		{"relay without host", with(func(d *Descriptor) { d.Addresses.Relays = []string{"wss:///x"} }), ErrBadAddress},
		{"iroh endpoint of another key", with(func(d *Descriptor) { d.Addresses.Iroh.EndpointID = other.EndpointID() }), ErrBadAddress},
		{"iroh direct not ip:port", with(func(d *Descriptor) { d.Addresses.Iroh.Direct = []string{"localhost:80"} }), ErrBadAddress},
		{"iroh relay not http", with(func(d *Descriptor) { d.Addresses.Iroh.RelayURL = "ftp://x" }), ErrBadAddress},
		{"too many addresses", with(func(d *Descriptor) {
			d.Addresses.Relays = nil
			for i := 0; i <= lim.MaxAddresses; i++ {
				d.Addresses.Relays = append(d.Addresses.Relays, "ws://127.0.0.1:1")
			}
		}), ErrBadAddress},
		{"protocol with space", with(func(d *Descriptor) { d.Protocols = []string{"nostr nip-01"} }), ErrBadProtocol},
		{"protocol repeated", with(func(d *Descriptor) { d.Protocols = []string{"a", "a"} }), ErrBadProtocol},
		{"protocol empty", with(func(d *Descriptor) { d.Protocols = []string{""} }), ErrBadProtocol},
		{"offer with zero bound", with(func(d *Descriptor) { d.Offers.Storage.MaxBytes = 0 }), ErrBadOffer},
		{"compute offer with zero bound", with(func(d *Descriptor) { d.Offers.Compute.MaxFuel = 0 }), ErrBadOffer},
		{"did not did:key", with(func(d *Descriptor) { d.DID = "did:web:example.org" }), ErrMalformed},
		{"payload version 2", rawJWS(k, header(k), strings.Replace(payloadOf(t, sample(k)), `"v":1`, `"v":2`, 1)), ErrUnsupportedType},
		{"unknown payload field", rawJWS(k, header(k), strings.Replace(payloadOf(t, sample(k)), `{`, `{"extra":1,`, 1)), ErrMalformed},
		{"trailing payload data", rawJWS(k, header(k), payloadOf(t, sample(k))+" {}"), ErrMalformed},
		{"payload not JSON", rawJWS(k, header(k), "hello"), ErrMalformed},
		{"typ JWT", rawJWS(k, strings.Replace(header(k), Type, "JWT", 1), payloadOf(t, sample(k))), ErrUnsupportedType},
		{"typ missing", rawJWS(k, strings.Replace(header(k), `,"typ":"`+Type+`"`, "", 1), payloadOf(t, sample(k))), ErrUnsupportedType},
		{"alg none", rawJWS(k, strings.Replace(header(k), "EdDSA", "none", 1), payloadOf(t, sample(k))), ErrUnsupportedType},
		{"crit header", rawJWS(k, strings.Replace(header(k), `"alg"`, `"crit":["x"],"x":1,"alg"`, 1), payloadOf(t, sample(k))), ErrMalformed},
		{"kid not a verification method", rawJWS(k, strings.Replace(header(k), "#", "#x", 1), payloadOf(t, sample(k))), ErrMalformed},
		{"kid not a DID", rawJWS(k, `{"alg":"EdDSA","kid":"k1","typ":"`+Type+`"}`, payloadOf(t, sample(k))), ErrMalformed},
		{"two parts", []byte(parts[0] + "." + parts[1]), ErrMalformed},
		{"empty", nil, ErrMalformed},
		{"JSON serialization", []byte(`{"payload":"` + parts[1] + `"}`), ErrMalformed},
		{"too large", append(append([]byte{}, good.JWS...), make([]byte, lim.MaxBytes)...), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Verify(tc.raw, testNow, lim)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, %v; want %v", s, err, tc.want)
			}
		})
	}
}

func TestSignRefuses(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	lim := DefaultLimits()
	if _, err := Sign(other, sample(k), lim); !errors.Is(err, ErrWrongSigner) {
		t.Fatalf("signing another DID's descriptor: %v", err)
	}
	d := sample(k)
	d.Class = "core"
	if _, err := Sign(k, d, lim); !errors.Is(err, ErrUnknownClass) {
		t.Fatalf("signing an unknown class: %v", err)
	}
	small := lim
	small.MaxBytes = 200
	if _, err := Sign(k, sample(k), small); !errors.Is(err, ErrMalformed) {
		t.Fatalf("signing beyond MaxBytes: %v", err)
	}
}

func TestErrorsAreDistinct(t *testing.T) {
	all := []error{ErrMalformed, ErrUnsupportedType, ErrBadSignature, ErrWrongSigner, ErrUnknownClass,
		ErrBadAddress, ErrBadProtocol, ErrBadOffer, ErrBadValidity, ErrNotYetValid, ErrExpired, ErrReplayed}
	for i, a := range all {
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v is also %v", a, b)
			}
		}
	}
}

func TestParseClass(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{{"anchor", nil}, {"home", nil}, {"leaf", nil}, {"Anchor", ErrUnknownClass}, {"", ErrUnknownClass}} {
		if _, err := ParseClass(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("ParseClass(%q) = %v, want %v", tc.in, err, tc.want)
		}
	}
}
