// Package grant is fleetmesh's bilateral grant (spec/grants.md): one node
// (the grantor) gives another (the grantee) a quota of one metered service
// per accounting window, from a start to an end, revocable with notice. A
// grant is signed by both over identical canonical bytes (deterministic
// CBOR, package internal/canon) and travels in the messages of the grant
// protocol, https://fleetmesh.org/protocols/grant/1.0, whose types and
// bodies are here.
//
// It is not where grants are negotiated, kept or enforced (package
// accounting does that with the node's meter), and it prices nothing.
package grant

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/canon"
	"fleetmesh.org/fleetmesh/meter"
)

// Protocol identifier and message types.
const (
	PIURI       = "https://fleetmesh.org/protocols/grant/1.0"
	TypeOffer   = PIURI + "/offer"
	TypeAccept  = PIURI + "/accept"
	TypeDecline = PIURI + "/decline"
	TypeRevoke  = PIURI + "/revoke"
)

// Version is the grant format version.
const Version = 1

// SignaturePrefix is prepended to a grant's canonical bytes before signing.
const SignaturePrefix = "fleetmesh grant v1\x00"

// Grant is one grant. Quota is in the service's unit per window of
// WindowSecs; Start and End are Unix seconds; a revocation takes effect
// NoticeSecs after it is sent.
type Grant struct {
	V          int    `cbor:"v" json:"v"`
	ID         string `cbor:"id" json:"id"`
	Grantor    string `cbor:"grantor" json:"grantor"`
	Grantee    string `cbor:"grantee" json:"grantee"`
	Service    string `cbor:"service" json:"service"`
	Quota      uint64 `cbor:"quota" json:"quota"`
	WindowSecs int64  `cbor:"window_secs" json:"window_secs"`
	Start      int64  `cbor:"start" json:"start"`
	End        int64  `cbor:"end" json:"end"`
	NoticeSecs int64  `cbor:"notice_secs" json:"notice_secs"`
	SigGrantor []byte `cbor:"sig_grantor,omitempty" json:"sig_grantor,omitempty"`
	SigGrantee []byte `cbor:"sig_grantee,omitempty" json:"sig_grantee,omitempty"`
}

// ErrInvalid is wrapped by every refusal of a malformed grant.
var ErrInvalid = errors.New("grant: invalid")

// New returns an unsigned grant with a fresh id.
func New(grantor, grantee string, svc meter.Service, quota uint64, window time.Duration, start time.Time, length, notice time.Duration) *Grant {
	var b [16]byte
	rand.Read(b[:])
	return &Grant{V: Version, ID: hex.EncodeToString(b[:]), Grantor: grantor, Grantee: grantee, Service: svc.String(),
		Quota: quota, WindowSecs: int64(window / time.Second), Start: start.Unix(), End: start.Add(length).Unix(),
		NoticeSecs: int64(notice / time.Second)}
}

func (g *Grant) signingBytes() ([]byte, error) {
	c := *g
	c.SigGrantor, c.SigGrantee = nil, nil
	b, err := canon.Marshal(&c)
	if err != nil {
		return nil, err
	}
	return append([]byte(SignaturePrefix), b...), nil
}

// Sign adds key's signature as grantor or grantee.
func (g *Grant) Sign(key *identity.Key) error {
	b, err := g.signingBytes()
	if err != nil {
		return err
	}
	switch key.DID() {
	case g.Grantor:
		g.SigGrantor = key.Sign(b)
	case g.Grantee:
		g.SigGrantee = key.Sign(b)
	default:
		return fmt.Errorf("%w: %s is not a party to grant %s", ErrInvalid, key.DID(), g.ID)
	}
	return nil
}

// Check checks a grant's fields and whichever signatures it carries;
// needBoth also requires both.
func (g *Grant) Check(needBoth bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: grant %s: %s", ErrInvalid, g.ID, fmt.Sprintf(format, args...))
	}
	if g.V != Version {
		return bad("version %d, want %d", g.V, Version)
	}
	if len(g.ID) != 32 {
		return bad("id must be 32 hex digits")
	}
	if _, err := hex.DecodeString(g.ID); err != nil {
		return bad("id must be 32 hex digits")
	}
	if _, ok := meter.ParseService(g.Service); !ok {
		return bad("unknown service %q (one of %v)", g.Service, meter.Names())
	}
	if g.Grantor == g.Grantee {
		return bad("grantor and grantee are the same")
	}
	if g.WindowSecs <= 0 || g.End <= g.Start || g.NoticeSecs < 0 {
		return bad("window_secs must be positive, end after start, notice_secs >= 0")
	}
	b, err := g.signingBytes()
	if err != nil {
		return err
	}
	for _, s := range []struct {
		did  string
		sig  []byte
		role string
	}{{g.Grantor, g.SigGrantor, "grantor"}, {g.Grantee, g.SigGrantee, "grantee"}} {
		pub, err := identity.PublicKeyFromDID(s.did)
		if err != nil {
			return bad("%s: %v", s.role, err)
		}
		if s.sig == nil {
			if needBoth || s.role == "grantor" {
				return bad("no %s signature", s.role)
			}
			continue
		}
		if len(s.sig) != ed25519.SignatureSize || !ed25519.Verify(pub, b, s.sig) {
			return bad("%s signature does not verify", s.role)
		}
	}
	return nil
}

// Encode returns the grant's canonical bytes.
func (g *Grant) Encode() ([]byte, error) { return canon.Marshal(g) }

// Decode parses a grant in canonical form and checks it (the grantor's
// signature at least).
func Decode(data []byte) (*Grant, error) {
	var g Grant
	if err := canon.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := g.Check(false); err != nil {
		return nil, err
	}
	return &g, nil
}

// ActiveAt reports whether the grant is in force at t, given the time its
// revocation takes effect (0: not revoked).
func (g *Grant) ActiveAt(t time.Time, revokedAt int64) bool {
	s := t.Unix()
	return s >= g.Start && s < g.End && (revokedAt == 0 || s < revokedAt)
}

// OfferBody is an offer's body: the grant, signed by the grantor.
type OfferBody struct {
	Grant []byte `json:"grant"`
}

// AcceptBody is an accept's body: the grant, signed by both.
type AcceptBody struct {
	Grant []byte `json:"grant"`
}

// DeclineBody is a decline's body.
type DeclineBody struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// RevokeBody is a revocation: the grant's id and when it stops (at least
// the grant's notice after the message is sent).
type RevokeBody struct {
	ID          string `json:"id"`
	EffectiveAt int64  `json:"effective_at"`
}
