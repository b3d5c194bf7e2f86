package invite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil/bech32"

	"fleetmesh.org/fleetmesh/identity"
)

func testKey(t testing.TB, seed byte) *identity.Key {
	t.Helper()
	k, err := identity.KeyFromSeed(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var testAddrs = []string{"/ip4/198.51.100.7/tcp/4001", "/ip4/198.51.100.7/udp/4001/quic-v1", "/dns4/node.example.org/tcp/4001"}

// rawOf decodes a code to its TLV bytes.
func rawOf(t *testing.T, code string) []byte {
	t.Helper()
	_, raw, err := bech32.DecodeToBase256(code)
	if err != nil {
		// DecodeToBase256 keeps BIP-173's 90-character limit.
		_, d5, err := bech32.DecodeNoLimit(code)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = bech32.ConvertBits(d5, 5, 8, false); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

func encode(t *testing.T, raw []byte) string {
	t.Helper()
	s, err := bech32.EncodeFromBase256(HRP, raw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// resign replaces the signature of raw with k's over the bytes before it.
func resign(k *identity.Key, raw []byte) []byte {
	body := raw[:len(raw)-66]
	out := bytes.Clone(body)
	return append(out, append([]byte{tlvSig, 64}, k.Sign(signedBytes(body))...)...)
}

func TestRoundTrip(t *testing.T) {
	k := testKey(t, 1)
	now := time.Now()
	exp := time.Now().Add(time.Hour)
	withP2P := testAddrs[0] + "/p2p/" + k.PeerID().String()
	code, err := New(k, append([]string{withP2P}, testAddrs...), "", exp)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{code, Link(code), strings.ToUpper(Link(code)), "  " + code + "\n"} {
		if !IsCode(in) {
			t.Errorf("IsCode(%q) = false", in)
		}
		inv, err := Parse(in, now)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if inv.DID() != k.DID() || inv.Expires.Unix() != exp.Unix() {
			t.Fatalf("got %s expiring %s", inv.DID(), inv.Expires)
		}
		boot := inv.Bootstrap()
		if len(boot) != len(testAddrs) {
			t.Fatalf("bootstrap %v: the duplicate address was kept", boot)
		}
		for i, a := range testAddrs {
			if want := a + "/p2p/" + k.PeerID().String(); boot[i] != want {
				t.Errorf("bootstrap[%d] = %s, want %s", i, boot[i], want)
			}
		}
	}
	withEndpoint, err := New(k, testAddrs, "http://127.0.0.1:7447/didcomm", exp)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Parse(withEndpoint, now)
	if err != nil || inv.Endpoint != "http://127.0.0.1:7447/didcomm" || len(inv.Addrs) != len(testAddrs) {
		t.Fatalf("Parse of a code with an endpoint: %+v, %v", inv, err)
	}
	if IsCode("wss://relay.example.org") {
		t.Error("a relay URL taken for a code")
	}
}

func TestParseRefuses(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	now := time.Now()
	code, err := New(k, testAddrs, "", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	raw := rawOf(t, code)
	addrAt := 2 + 32 // the first address TLV
	flip := func(i int) []byte {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return b
	}
	farExp := func() []byte {
		b := bytes.Clone(raw)
		binary.BigEndian.PutUint32(b[len(b)-66-4:], uint32(now.Add(MaxLifetime+time.Hour).Unix()))
		return resign(k, b)
	}
	otherKey := bytes.Clone(raw)
	copy(otherKey[2:34], other.PublicKey())
	typo := []byte(code)
	if typo[20] == 'q' {
		typo[20] = 'p'
	} else {
		typo[20] = 'q'
	}
	cases := []struct {
		name string
		in   string
		now  time.Time
		want error
	}{
		{"typo (checksum)", string(typo), now, ErrMalformed},
		{"tampered address", encode(t, flip(addrAt+3)), now, ErrBadSignature},
		{"tampered expiry", encode(t, flip(len(raw)-67)), now, ErrBadSignature},
		{"tampered signature", encode(t, flip(len(raw)-1)), now, ErrBadSignature},
		{"signed by another key", encode(t, resign(other, raw)), now, ErrBadSignature},
		{"key swapped for another", encode(t, otherKey), now, ErrBadSignature},
		{"expired", code, now.Add(2 * time.Hour), ErrExpired},
		{"at expiry", code, time.Unix(now.Add(time.Hour).Unix(), 0), ErrExpired},
		{"expiry too far", encode(t, farExp()), now, ErrExpired},
		{"empty", "", now, ErrMalformed},
		{"other prefix", strings.Replace(encode(t, raw), HRP, "nprofile", 1), now, ErrMalformed},
		{"other HRP, valid checksum", mustEncode(t, "nprofile", raw), now, ErrMalformed},
		{"no signature", encode(t, raw[:len(raw)-66]), now, ErrMalformed},
		{"data after signature", encode(t, append(bytes.Clone(raw), tlvAddr, 0)), now, ErrMalformed},
		{"key not first", encode(t, append(bytes.Clone(raw[addrAt:]), raw[:addrAt]...)), now, ErrMalformed},
		{"short key", encode(t, append([]byte{tlvKey, 31}, raw[3:]...)), now, ErrMalformed},
		{"unknown type", encode(t, append(append(bytes.Clone(raw[:addrAt]), 9, 1, 0), raw[addrAt:]...)), now, ErrMalformed},
		{"truncated", encode(t, raw[:len(raw)-10]), now, ErrMalformed},
		{"bad multiaddr", encode(t, resign(k, append(append(bytes.Clone(raw[:addrAt]), tlvAddr, 2, 0xff, 0xff), raw[addrAt:]...))), now, ErrMalformed},
		{"too long", strings.Repeat("q", MaxCodeBytes+1), now, ErrMalformed},
		{"a relay URL", "wss://relay.example.org", now, ErrMalformed},
		{"endpoint before the addresses", encode(t, resign(k, append(append(bytes.Clone(raw[:addrAt]), tlvEndpoint, 18), append([]byte("http://127.0.0.1:1"), raw[addrAt:]...)...))), now, ErrMalformed},
		{"endpoint not http", encode(t, resign(k, append(append(bytes.Clone(raw[:len(raw)-66-6]), tlvEndpoint, 16), append([]byte("ws://127.0.0.1:1"), raw[len(raw)-66-6:]...)...))), now, ErrMalformed},
		{"endpoint twice", encode(t, resign(k, append(append(bytes.Clone(raw[:len(raw)-66-6]), tlvEndpoint, 18), append([]byte("http://127.0.0.1:1"), append([]byte{tlvEndpoint, 18}, append([]byte("http://127.0.0.1:1"), raw[len(raw)-66-6:]...)...)...)...))), now, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inv, err := Parse(c.in, c.now)
			if !errors.Is(err, c.want) {
				t.Fatalf("Parse = %v, %v; want %v", inv, err, c.want)
			}
		})
	}
}

func mustEncode(t *testing.T, hrp string, raw []byte) string {
	t.Helper()
	s, err := bech32.EncodeFromBase256(hrp, raw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewRefuses(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	exp := time.Now().Add(time.Hour)
	many := make([]string, MaxAddrs+1)
	for i := range many {
		many[i] = fmt.Sprintf("/ip4/10.0.0.1/tcp/%d", 4000+i)
	}
	cases := []struct {
		name     string
		addrs    []string
		endpoint string
		exp      time.Time
	}{
		{"no address", nil, "", exp},
		{"not a multiaddr", []string{"198.51.100.7:4001"}, "", exp},
		{"another peer's address", []string{testAddrs[0] + "/p2p/" + other.PeerID().String()}, "", exp},
		{"only a peer id", []string{"/p2p/" + k.PeerID().String()}, "", exp},
		{"too many", many, "", exp},
		{"expiry too far", testAddrs, "", time.Now().Add(MaxLifetime + time.Hour)},
		{"endpoint not http", testAddrs, "ws://127.0.0.1:7447", exp},
		{"endpoint without host", testAddrs, "http:///didcomm", exp},
		{"endpoint too long", testAddrs, "https://node.example.org/" + strings.Repeat("d", 240), exp},
	}
	for _, c := range cases {
		if code, err := New(k, c.addrs, c.endpoint, c.exp); err == nil {
			t.Errorf("%s: New = %s, want an error", c.name, code)
		}
	}
}

// TestCodeIsShort holds the code to what a person can paste or scan: a
// node with two addresses and an endpoint fits in a few hundred characters.
func TestCodeIsShort(t *testing.T) {
	code, err := New(testKey(t, 1), testAddrs[:2], "https://node.example.org/didcomm", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(code) > 360 {
		t.Fatalf("code of two addresses and an endpoint is %d characters: %s", len(code), code)
	}
}

func FuzzParse(f *testing.F) {
	k := testKey(f, 1)
	now := time.Now()
	code, err := New(k, testAddrs, "", now.Add(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(code)
	withEndpoint, err := New(k, testAddrs, "http://127.0.0.1:7447/didcomm", now.Add(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(withEndpoint)
	f.Add(Link(strings.ToUpper(code)))
	f.Add(HRP + "1qqqqqq")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		inv, err := Parse(s, now)
		if err != nil {
			return
		}
		// Whatever verifies has addresses, each with the key's PeerID.
		if len(inv.Addrs) == 0 || len(inv.Bootstrap()) != len(inv.Addrs) {
			t.Fatalf("accepted %q with addresses %v", s, inv.Addrs)
		}
		if inv.Endpoint != "" && CheckEndpoint(inv.Endpoint) != nil {
			t.Fatalf("accepted %q with endpoint %q", s, inv.Endpoint)
		}
	})
}

func TestSelect(t *testing.T) {
	in := []string{"/ip4/127.0.0.1/tcp/4001", "/ip4/192.168.1.5/tcp/4001", "/ip4/198.51.100.7/tcp/4001", "/ip6/::1/tcp/4001"}
	got := Select(in)
	want := []string{"/ip4/198.51.100.7/tcp/4001", "/ip4/192.168.1.5/tcp/4001", "/ip4/127.0.0.1/tcp/4001", "/ip6/::1/tcp/4001"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Select = %v, want %v", got, want)
	}
	many := make([]string, 0, MaxAddrs+4)
	for i := range MaxAddrs + 3 {
		many = append(many, fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 4000+i))
	}
	many = append(many, "/ip4/198.51.100.7/tcp/4001")
	got = Select(many)
	if len(got) != MaxAddrs || got[0] != "/ip4/198.51.100.7/tcp/4001" {
		t.Fatalf("Select of %d kept %d, first %s: the public address must stay", len(many), len(got), got[0])
	}
}
