package descriptor

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the whole decoder (JWS envelope,
// header, signature, payload). Whatever it accepts must be self-consistent.
func FuzzParse(f *testing.F) {
	k := testKey(f, 1)
	s, err := Sign(k, sample(k), DefaultLimits())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s.JWS)
	f.Add(s.JWS[:len(s.JWS)-3])
	f.Add([]byte("a.b.c"))
	f.Add([]byte("..."))
	f.Add([]byte(`{"payload":"e30","signatures":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := Parse(raw, DefaultLimits())
		if err != nil {
			return
		}
		if !bytes.Equal(got.JWS, raw) || !got.CID.Equals(CIDOf(raw)) {
			t.Fatalf("accepted %q but JWS/CID do not match it", raw)
		}
		if err := got.Descriptor.Validate(DefaultLimits()); err != nil {
			t.Fatalf("accepted a descriptor that does not validate: %v", err)
		}
	})
}

// FuzzPayload signs arbitrary payload bytes with a valid key and header, so
// the fuzzer reaches the payload rules past the signature check. An accepted
// payload must survive a re-encode, re-sign and re-parse unchanged.
func FuzzPayload(f *testing.F) {
	k := testKey(f, 1)
	good, err := json.Marshal(func() Descriptor { d := sample(k); d.V = Version; return d }())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"v":1,"did":"` + k.DID() + `","class":"leaf","seq":1,"iat":1,"exp":2,"addrs":{},"offers":{}}`))
	f.Add([]byte(`{"v":1,"did":"` + k.DID() + `","class":"home","seq":1,"iat":1,"exp":2,"addrs":{"libp2p":["/ip4/1.2.3.4/tcp/1"]},"offers":{"storage":{"max_bytes":1,"retention_seconds":1}}}`))
	f.Add([]byte(`{"v":1,"did":"` + k.DID() + `","class":"home","seq":1,"iat":1,"exp":2,"addrs":{"libp2p":["/ip4/1.2.3.4/tcp/1/p2p-circuit/p2p/` + k.PeerID().String() + `"]},"offers":{}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"v":1,"seq":-1}`))
	hdr := header(k)
	f.Fuzz(func(t *testing.T, payload []byte) {
		got, err := Parse(rawJWS(k, hdr, string(payload)), DefaultLimits())
		if errors.Is(err, ErrBadSignature) {
			// The signature is ours and valid; only the payload varies.
			t.Fatalf("valid signature reported as bad: %v", err)
		}
		if err != nil {
			return
		}
		again, err := Sign(k, got.Descriptor, DefaultLimits())
		if err != nil {
			t.Fatalf("accepted payload %q cannot be re-signed: %v", payload, err)
		}
		back, err := Parse(again.JWS, DefaultLimits())
		if err != nil {
			t.Fatalf("re-signed descriptor refused: %v", err)
		}
		a, _ := json.Marshal(got.Descriptor)
		b, _ := json.Marshal(back.Descriptor)
		if !bytes.Equal(a, b) {
			t.Fatalf("round trip changed the descriptor:\n%s\n%s", a, b)
		}
	})
}
