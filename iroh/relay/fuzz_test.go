package relay

import (
	"bytes"
	"encoding/base64"
	"testing"
)

func FuzzDecodeClientFrame(f *testing.F) {
	var k [KeyLen]byte
	k[0] = 9
	f.Add(AppendClientDatagram(nil, k, 1, 0, []byte("x")))
	f.Add(AppendClientDatagram(nil, k, 0, 3, []byte("abcdefg")))
	f.Add(AppendPing(nil, FramePing, [8]byte{1}))
	f.Add(AppendPing(nil, FramePong, [8]byte{2}))
	f.Add([]byte{0x40, 0x04})
	f.Add([]byte{0xc0, 0, 0, 0, 0, 0, 0, 4})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeClientFrame(b)
		if err != nil {
			return
		}
		var again []byte
		switch fr.Type {
		case FrameClientToRelayDatagram, FrameClientToRelayBatch:
			again = AppendClientDatagram(nil, fr.Dst, fr.ECN, fr.SegmentSize, fr.Contents)
		case FramePing, FramePong:
			again = AppendPing(nil, fr.Type, fr.Data)
		default:
			t.Fatalf("decoded frame type %d from a client", fr.Type)
		}
		fr2, err := DecodeClientFrame(again)
		if err != nil || fr2.Dst != fr.Dst || fr2.ECN != fr.ECN || !bytes.Equal(fr2.Contents, fr.Contents) || fr2.Data != fr.Data {
			t.Fatalf("re-encoding %x: %x, %v", b, again, err)
		}
	})
}

func FuzzDecodeServerFrame(f *testing.F) {
	var k [KeyLen]byte
	f.Add(AppendServerChallenge(nil, [16]byte{1}))
	f.Add(AppendServerConfirmsAuth(nil))
	f.Add(AppendServerDeniesAuth(nil, "signature invalid"))
	f.Add(AppendRelayDatagram(nil, k, 2, 0, []byte("x")))
	f.Add(AppendRelayDatagram(nil, k, 0, 4, []byte("abcdefgh")))
	f.Add(AppendEndpointGone(nil, k))
	f.Add(AppendStatus(nil, StatusHealthy))
	f.Add(AppendHealth(nil, "problem"))
	f.Add(AppendRestarting(nil, 1000, 5000))
	f.Add(AppendPing(nil, FramePing, [8]byte{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeServerFrame(b)
		if err != nil {
			return
		}
		if fr.Type == FrameServerDeniesAuth {
			fr2, err := DecodeServerFrame(AppendServerDeniesAuth(nil, fr.Problem))
			if err != nil || fr2.Problem != fr.Problem {
				t.Fatalf("denial %q does not round-trip: %v", fr.Problem, err)
			}
		}
	})
}

func FuzzDecodeClientAuth(f *testing.F) {
	_, priv := fixedKey()
	f.Add(AppendClientAuth(nil, SignChallenge(priv, [16]byte{3})))
	f.Add([]byte{1})
	f.Add(append(AppendClientAuth(nil, ClientAuth{}), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeClientAuth(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendClientAuth(nil, a), b) {
			t.Fatalf("%x does not re-encode to itself", b)
		}
		a.Verify([16]byte{}) // must not panic on any key
	})
}

func FuzzDecodeKeyMaterialAuth(f *testing.F) {
	raw := make([]byte, 0, 113)
	raw = append(raw, make([]byte, KeyLen)...)
	raw = appendPostcardLen(raw, 64)
	raw = append(raw, make([]byte, 64+16)...)
	f.Add(base64.RawURLEncoding.EncodeToString(raw))
	f.Add("")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, v string) {
		a, err := DecodeKeyMaterialAuth(v)
		if err != nil {
			return
		}
		var again []byte
		again = append(again, a.Key[:]...)
		again = appendPostcardLen(again, 64)
		again = append(again, a.Signature[:]...)
		again = append(again, a.Suffix[:]...)
		if base64.RawURLEncoding.EncodeToString(again) != v {
			t.Fatalf("%q does not re-encode to itself", v)
		}
	})
}
