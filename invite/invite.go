package invite

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"fleetmesh.org/fleetmesh/identity"
)

// HRP is the bech32 human-readable part of a join code.
const HRP = "fmjoin"

// Scheme is the URI scheme of the link form (NIP-21 style).
const Scheme = "fleetmesh:"

// The TLV types (spec/invite.md). Each value is at most 255 bytes, its
// length a single byte, as in NIP-19.
const (
	tlvKey     = 0 // 32-byte Ed25519 public key; exactly one, first
	tlvAddr    = 1 // binary multiaddr without the node's /p2p/; one or more
	tlvExpires = 2 // 4-byte big-endian Unix seconds; exactly one
	tlvSig     = 3 // 64-byte Ed25519 signature; exactly one, last
	// tlvEndpoint is the node's DIDComm HTTP endpoint URL (UTF-8); at
	// most one, after the addresses, before the expiry. A leaf pairs
	// through it.
	tlvEndpoint = 4
)

// sigContext is prefixed to the signed bytes so that a join code signature
// can never be taken for a signature over anything else the node key signs.
const sigContext = "fleetmesh-invite-v1\x00"

// Bounds of a code.
const (
	// MaxAddrs bounds the addresses in a code.
	MaxAddrs = 16
	// MaxCodeBytes bounds the text Parse accepts.
	MaxCodeBytes = 2048
	// MaxLifetime bounds how far in the future a code may expire, so a
	// leaked old code cannot be made to live for years. A code has no
	// issued-at: the bound is checked against now.
	MaxLifetime = 30 * 24 * time.Hour
)

// Errors of Parse. Each refusal wraps one of these with its detail.
var (
	// ErrMalformed: not bech32 with this HRP, a bad checksum (a typo), a
	// TLV out of place or of the wrong size, or a bad multiaddr.
	ErrMalformed = errors.New("malformed join code")
	// ErrBadSignature: the signature does not verify under the code's key,
	// so the code was changed after signing or another key signed it.
	ErrBadSignature = errors.New("join code signature does not verify (tampered or signed by another key)")
	// ErrExpired: now is at or past the code's expiry, or the expiry is
	// further away than MaxLifetime.
	ErrExpired = errors.New("join code expired")
)

// Invite is a decoded, verified join code.
type Invite struct {
	// PublicKey is the inviting node's key; its DID and PeerID follow.
	PublicKey ed25519.PublicKey
	// Addrs are the node's multiaddrs without its /p2p/ component.
	Addrs []multiaddr.Multiaddr
	// Endpoint is the node's DIDComm endpoint (http(s)://HOST:PORT/didcomm)
	// that a leaf pairs with, or "" when the code carries none.
	Endpoint string
	// Expires is when the code stops being accepted.
	Expires time.Time
}

// DID is the inviting node's did:key DID.
func (inv *Invite) DID() string { return identity.DIDFromPublicKey(inv.PublicKey) }

// Bootstrap are the addresses with the node's /p2p/<PeerID>, as
// `--bootstrap` takes them.
func (inv *Invite) Bootstrap() []string {
	id, err := identity.PeerIDFromPublicKey(inv.PublicKey)
	if err != nil {
		return nil // Parse checked the key
	}
	out := make([]string, 0, len(inv.Addrs))
	for _, a := range inv.Addrs {
		out = append(out, a.String()+"/p2p/"+id.String())
	}
	return out
}

// New makes the join code of k reachable at addrs (multiaddrs, with or
// without this node's trailing /p2p/) and, if endpoint is not empty, at
// that DIDComm endpoint (an http(s) URL, for leaves), valid until expires.
// Duplicate addresses are dropped; more than MaxAddrs distinct addresses
// is an error.
func New(k *identity.Key, addrs []string, endpoint string, expires time.Time) (string, error) {
	if len(addrs) == 0 {
		return "", errors.New("invite: no mesh address to put in the code (is the node listening on one? see --mesh-listen)")
	}
	exp := expires.Unix()
	if exp <= 0 || exp > int64(^uint32(0)) {
		return "", fmt.Errorf("invite: expiry %s out of range", expires)
	}
	if time.Until(expires) > MaxLifetime {
		return "", fmt.Errorf("invite: expiry %s is more than %s away", expires.UTC().Format(time.RFC3339), MaxLifetime)
	}
	var b bytes.Buffer
	pub := k.PublicKey()
	writeTLV(&b, tlvKey, pub)
	seen := map[string]bool{}
	for _, s := range addrs {
		a, err := localPart(s, k.PeerID())
		if err != nil {
			return "", err
		}
		if seen[string(a.Bytes())] {
			continue
		}
		seen[string(a.Bytes())] = true
		if len(seen) > MaxAddrs {
			return "", fmt.Errorf("invite: more than %d addresses", MaxAddrs)
		}
		if len(a.Bytes()) > 255 {
			return "", fmt.Errorf("invite: multiaddr %s is %d bytes, at most 255", a, len(a.Bytes()))
		}
		writeTLV(&b, tlvAddr, a.Bytes())
	}
	if endpoint != "" {
		if err := CheckEndpoint(endpoint); err != nil {
			return "", err
		}
		writeTLV(&b, tlvEndpoint, []byte(endpoint))
	}
	var e [4]byte
	binary.BigEndian.PutUint32(e[:], uint32(exp))
	writeTLV(&b, tlvExpires, e[:])
	writeTLV(&b, tlvSig, k.Sign(signedBytes(b.Bytes())))
	code, err := bech32.EncodeFromBase256(HRP, b.Bytes())
	if err != nil {
		return "", fmt.Errorf("invite: %w", err)
	}
	return code, nil
}

// CheckEndpoint accepts what a code may carry as its DIDComm endpoint: an
// absolute http or https URL with a host, at most 255 bytes.
func CheckEndpoint(endpoint string) error {
	if len(endpoint) > 255 {
		return fmt.Errorf("invite: endpoint is %d bytes, at most 255", len(endpoint))
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("invite: endpoint %q: %w", endpoint, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invite: endpoint %q: want http(s)://HOST:PORT/didcomm", endpoint)
	}
	return nil
}

// Link is the link form of a code: the code behind the fleetmesh: scheme.
func Link(code string) string { return Scheme + code }

// localPart parses s and strips a trailing /p2p/ naming self; an address
// that names another peer last is refused, since the code's key names the
// peer to dial (a circuit address keeps its relay's /p2p/).
func localPart(s string, self peer.ID) (multiaddr.Multiaddr, error) {
	a, err := multiaddr.NewMultiaddr(s)
	if err != nil {
		return nil, fmt.Errorf("invite: multiaddr %q: %w", s, err)
	}
	if len(a) == 0 {
		return nil, fmt.Errorf("invite: empty multiaddr %q", s)
	}
	last := a[len(a)-1]
	if last.Protocol().Code != multiaddr.P_P2P {
		return a, nil
	}
	if last.Value() != self.String() {
		return nil, fmt.Errorf("invite: multiaddr %q names peer %s, not this node's %s", s, last.Value(), self)
	}
	if len(a) == 1 {
		return nil, fmt.Errorf("invite: multiaddr %q has no transport address", s)
	}
	return a[:len(a)-1], nil
}

func writeTLV(b *bytes.Buffer, typ byte, v []byte) {
	b.WriteByte(typ)
	b.WriteByte(byte(len(v)))
	b.Write(v)
}

func signedBytes(tlvs []byte) []byte {
	return append([]byte(sigContext), tlvs...)
}

// IsCode says whether s looks like a join code or its link (by its
// prefix), so a caller can tell a code from a relay URL before parsing.
func IsCode(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, Scheme)
	return strings.HasPrefix(s, HRP+"1")
}

// Parse decodes and verifies a join code or its link form at now.
func Parse(s string, now time.Time) (*Invite, error) {
	if len(s) > MaxCodeBytes {
		return nil, fmt.Errorf("invite: code is %d bytes, at most %d: %w", len(s), MaxCodeBytes, ErrMalformed)
	}
	s = strings.TrimSpace(s)
	if len(s) >= len(Scheme) && strings.EqualFold(s[:len(Scheme)], Scheme) {
		s = s[len(Scheme):]
	}
	hrp, data5, version, err := bech32.DecodeNoLimitWithVersion(s)
	if err != nil {
		return nil, fmt.Errorf("invite: not bech32 (a typo?): %v: %w", err, ErrMalformed)
	}
	if hrp != HRP || version != bech32.Version0 {
		return nil, fmt.Errorf("invite: prefix %q is not %q: %w", hrp, HRP, ErrMalformed)
	}
	raw, err := bech32.ConvertBits(data5, 5, 8, false)
	if err != nil {
		return nil, fmt.Errorf("invite: %v: %w", err, ErrMalformed)
	}
	return decode(raw, now)
}

// decode checks the TLV list: its order, sizes, signature and expiry.
func decode(raw []byte, now time.Time) (*Invite, error) {
	inv := &Invite{}
	var exp int64
	sigAt := -1
	var sig []byte
	for i := 0; i < len(raw); {
		if sigAt >= 0 {
			return nil, fmt.Errorf("invite: data after the signature: %w", ErrMalformed)
		}
		if len(raw)-i < 2 {
			return nil, fmt.Errorf("invite: truncated TLV at byte %d: %w", i, ErrMalformed)
		}
		typ, n := raw[i], int(raw[i+1])
		if len(raw)-i-2 < n {
			return nil, fmt.Errorf("invite: TLV of type %d runs past the end: %w", typ, ErrMalformed)
		}
		v := raw[i+2 : i+2+n]
		if (i == 0) != (typ == tlvKey) {
			return nil, fmt.Errorf("invite: the key must come first, exactly once: %w", ErrMalformed)
		}
		switch typ {
		case tlvKey:
			if n != ed25519.PublicKeySize {
				return nil, fmt.Errorf("invite: key of %d bytes: %w", n, ErrMalformed)
			}
			inv.PublicKey = ed25519.PublicKey(bytes.Clone(v))
		case tlvAddr:
			if exp != 0 || inv.Endpoint != "" {
				return nil, fmt.Errorf("invite: address after the endpoint or the expiry: %w", ErrMalformed)
			}
			if len(inv.Addrs) == MaxAddrs {
				return nil, fmt.Errorf("invite: more than %d addresses: %w", MaxAddrs, ErrMalformed)
			}
			a, err := multiaddr.NewMultiaddrBytes(bytes.Clone(v))
			if err != nil || len(a) == 0 {
				return nil, fmt.Errorf("invite: address %d is not a multiaddr: %v: %w", len(inv.Addrs), err, ErrMalformed)
			}
			if a[len(a)-1].Protocol().Code == multiaddr.P_P2P {
				return nil, fmt.Errorf("invite: address %s ends in /p2p/ (the key names the peer): %w", a, ErrMalformed)
			}
			inv.Addrs = append(inv.Addrs, a)
		case tlvEndpoint:
			if exp != 0 || inv.Endpoint != "" || len(inv.Addrs) == 0 {
				return nil, fmt.Errorf("invite: the endpoint must come once, after the addresses and before the expiry: %w", ErrMalformed)
			}
			if !utf8.Valid(v) || CheckEndpoint(string(v)) != nil {
				return nil, fmt.Errorf("invite: endpoint %q is not an http(s) URL: %w", v, ErrMalformed)
			}
			inv.Endpoint = string(v)
		case tlvExpires:
			if n != 4 || exp != 0 {
				return nil, fmt.Errorf("invite: expiry must be 4 bytes, once: %w", ErrMalformed)
			}
			exp = int64(binary.BigEndian.Uint32(v))
		case tlvSig:
			if n != ed25519.SignatureSize {
				return nil, fmt.Errorf("invite: signature of %d bytes: %w", n, ErrMalformed)
			}
			sigAt, sig = i, v
		default:
			return nil, fmt.Errorf("invite: unknown TLV type %d: %w", typ, ErrMalformed)
		}
		i += 2 + n
	}
	if len(inv.Addrs) == 0 || exp == 0 || sigAt < 0 {
		return nil, fmt.Errorf("invite: needs a key, an address, an expiry and a signature: %w", ErrMalformed)
	}
	if !ed25519.Verify(inv.PublicKey, signedBytes(raw[:sigAt]), sig) {
		return nil, fmt.Errorf("invite: %w", ErrBadSignature)
	}
	inv.Expires = time.Unix(exp, 0)
	if !now.Before(inv.Expires) {
		return nil, fmt.Errorf("invite: %s: expired at %s: %w", inv.DID(), inv.Expires.UTC().Format(time.RFC3339), ErrExpired)
	}
	if inv.Expires.Sub(now) > MaxLifetime {
		return nil, fmt.Errorf("invite: expires %s, more than %s from now: %w", inv.Expires.UTC().Format(time.RFC3339), MaxLifetime, ErrExpired)
	}
	return inv, nil
}

// Select orders addrs for a code, most widely dialable first (public,
// then private, then loopback), and keeps at most MaxAddrs, so that a
// node with many interfaces still gets a code and the addresses a
// stranger can dial are never the ones left out.
func Select(addrs []string) []string {
	rank := func(s string) int {
		a, err := multiaddr.NewMultiaddr(s)
		if err != nil {
			return 3 // New reports it
		}
		switch {
		case manet.IsIPLoopback(a):
			return 2
		case manet.IsPrivateAddr(a):
			return 1
		}
		return 0
	}
	out := slices.Clone(addrs)
	slices.SortStableFunc(out, func(x, y string) int { return rank(x) - rank(y) })
	return out[:min(len(out), MaxAddrs)]
}
