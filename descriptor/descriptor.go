package descriptor

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/identity"
)

// Version is the payload version this package writes and reads.
const Version = 1

// MaxSeq is the largest sequence number: 2^53-1, so that every JSON
// implementation (JavaScript's included) reads the number exactly.
const MaxSeq = 1<<53 - 1

// Class is a node's declared operating class (docs/design.md §3).
type Class string

// The node classes. Declaring one is a claim, not a privilege.
const (
	ClassAnchor Class = "anchor"
	ClassHome   Class = "home"
	ClassLeaf   Class = "leaf"
)

// ParseClass returns the class named s, or ErrUnknownClass.
func ParseClass(s string) (Class, error) {
	switch c := Class(s); c {
	case ClassAnchor, ClassHome, ClassLeaf:
		return c, nil
	}
	return "", fmt.Errorf("descriptor: class %q: %w", s, ErrUnknownClass)
}

// Descriptor is the payload of a node descriptor: what a node declares about
// itself. Times are Unix seconds, as in JWT claims.
type Descriptor struct {
	V         int       `json:"v"`
	DID       string    `json:"did"`
	Class     Class     `json:"class"`
	Seq       uint64    `json:"seq"`
	IssuedAt  int64     `json:"iat"`
	Expires   int64     `json:"exp"`
	Addresses Addresses `json:"addrs"`
	Protocols []string  `json:"protocols,omitempty"`
	Offers    Offers    `json:"offers"`
}

// Addresses are the ways to reach a node. All are optional: a leaf may be
// reachable only through a mediator.
type Addresses struct {
	// Libp2p holds multiaddrs; one that ends in /p2p/<id> must name this
	// node's PeerID.
	Libp2p []string `json:"libp2p,omitempty"`
	// Relays holds ws:// or wss:// URLs of Nostr relays the node serves.
	Relays []string `json:"relays,omitempty"`
	// Iroh is the node's iroh endpoint, if it runs one.
	Iroh *IrohAddr `json:"iroh,omitempty"`
}

// IrohAddr is an iroh endpoint address: the EndpointId (which must be this
// node's key), an optional home relay and direct socket addresses.
type IrohAddr struct {
	EndpointID string   `json:"endpoint_id"`
	RelayURL   string   `json:"relay_url,omitempty"`
	Direct     []string `json:"direct,omitempty"`
}

// Offers are the services a node offers others, each with its bounds. A nil
// offer is not offered.
type Offers struct {
	Storage      *StorageOffer      `json:"storage,omitempty"`
	CircuitRelay *CircuitRelayOffer `json:"circuit_relay,omitempty"`
	Mediation    *MediationOffer    `json:"mediation,omitempty"`
	Compute      *ComputeOffer      `json:"compute,omitempty"`
	IrohRelay    *IrohRelayOffer    `json:"iroh_relay,omitempty"`
}

// StorageOffer bounds the event storage a node offers.
type StorageOffer struct {
	MaxBytes         uint64 `json:"max_bytes"`
	RetentionSeconds uint64 `json:"retention_seconds"`
}

// CircuitRelayOffer bounds the libp2p circuit relay v2 service a node
// offers, in the terms of that protocol's reservation and circuit limits.
type CircuitRelayOffer struct {
	MaxReservations   uint64 `json:"max_reservations"`
	MaxCircuitSeconds uint64 `json:"max_circuit_seconds"`
	MaxCircuitBytes   uint64 `json:"max_circuit_bytes"`
}

// MediationOffer bounds the DIDComm mediation (coordinate-mediation 3.0,
// message pickup 3.0) a node offers.
type MediationOffer struct {
	MaxRecipients    uint64 `json:"max_recipients"`
	MaxQueueMessages uint64 `json:"max_queue_messages"`
	MaxQueueBytes    uint64 `json:"max_queue_bytes"`
}

// ComputeOffer bounds the WebAssembly compute a node offers per job.
type ComputeOffer struct {
	MaxConcurrentJobs uint64 `json:"max_concurrent_jobs"`
	MaxFuel           uint64 `json:"max_fuel"`
	MaxMemoryBytes    uint64 `json:"max_memory_bytes"`
}

// Limits bound what a descriptor may hold and how it is judged in time.
type Limits struct {
	// MaxBytes bounds the compact JWS.
	MaxBytes int
	// MaxAddresses bounds libp2p, relay and iroh direct addresses together.
	MaxAddresses int
	// MaxProtocols bounds the protocol list.
	MaxProtocols int
	// MaxFieldBytes bounds any one address or protocol id.
	MaxFieldBytes int
	// MaxLifetime bounds exp - iat, so a stolen old descriptor cannot be
	// made to live for years.
	MaxLifetime time.Duration
	// ClockSkew is how far in the future iat may be.
	ClockSkew time.Duration
}

// DefaultLimits are the limits nodes use unless configured otherwise.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes:      16 << 10,
		MaxAddresses:  64,
		MaxProtocols:  64,
		MaxFieldBytes: 512,
		MaxLifetime:   30 * 24 * time.Hour,
		ClockSkew:     5 * time.Minute,
	}
}

// Validate checks the rules of spec/descriptor.md that do not depend on the
// current time or on the signature.
func (d *Descriptor) Validate(lim Limits) error {
	if d.V != Version {
		return fmt.Errorf("descriptor: version %d: %w", d.V, ErrUnsupportedType)
	}
	pub, err := publicKeyOf(d.DID)
	if err != nil {
		return err
	}
	if _, err := ParseClass(string(d.Class)); err != nil {
		return err
	}
	if d.Seq == 0 || d.Seq > MaxSeq {
		return fmt.Errorf("descriptor: seq %d outside 1..2^53-1: %w", d.Seq, ErrBadValidity)
	}
	if d.IssuedAt <= 0 || d.Expires <= d.IssuedAt {
		return fmt.Errorf("descriptor: iat %d, exp %d: %w", d.IssuedAt, d.Expires, ErrBadValidity)
	}
	if life := d.Expires - d.IssuedAt; life > int64(lim.MaxLifetime/time.Second) {
		return fmt.Errorf("descriptor: lifetime %ds exceeds %s: %w", life, lim.MaxLifetime, ErrBadValidity)
	}
	if err := d.Addresses.validate(pub, lim); err != nil {
		return err
	}
	if err := validateProtocols(d.Protocols, lim); err != nil {
		return err
	}
	return d.Offers.validate()
}

// checkPeerIDs checks the /p2p/ components of a node's multiaddr: each
// must be the node's own PeerID, except in a circuit relay v2 address
// (<relay address>/p2p/<relay>/p2p-circuit[/p2p/<node>]), whose part before
// /p2p-circuit must name the relay, another peer, as the circuit relay spec
// requires. One /p2p-circuit at most: relays are not chained.
func checkPeerIDs(a multiaddr.Multiaddr, self string) error {
	circuits := 0
	var lastPeer string
	for _, c := range a {
		switch c.Protocol().Code {
		case multiaddr.P_CIRCUIT:
			circuits++
			if circuits > 1 {
				return errors.New("chains relays")
			}
			if lastPeer == "" || lastPeer == self {
				return errors.New("has /p2p-circuit without the relay's /p2p/ before it")
			}
			lastPeer = ""
		case multiaddr.P_P2P:
			if lastPeer != "" && lastPeer != self {
				return fmt.Errorf("names peer %s, not this node's %s", lastPeer, self)
			}
			lastPeer = c.Value()
		}
	}
	if lastPeer != "" && lastPeer != self {
		return fmt.Errorf("names peer %s, not this node's %s", lastPeer, self)
	}
	return nil
}

// publicKeyOf returns the key of a descriptor's DID, which must be a bare
// Ed25519 did:key DID (no fragment).
func publicKeyOf(did string) (ed25519.PublicKey, error) {
	pub, err := identity.PublicKeyFromDID(did)
	if err != nil || strings.Contains(did, "#") {
		return nil, fmt.Errorf("descriptor: did %q is not an Ed25519 did:key DID: %w", did, ErrMalformed)
	}
	return pub, nil
}

func (a *Addresses) validate(pub ed25519.PublicKey, lim Limits) error {
	n := len(a.Libp2p) + len(a.Relays)
	if a.Iroh != nil {
		n += len(a.Iroh.Direct)
	}
	if n > lim.MaxAddresses {
		return fmt.Errorf("descriptor: %d addresses, at most %d: %w", n, lim.MaxAddresses, ErrBadAddress)
	}
	peerID, err := identity.PeerIDFromPublicKey(pub)
	if err != nil {
		return fmt.Errorf("descriptor: %w", err)
	}
	for _, s := range a.Libp2p {
		if len(s) > lim.MaxFieldBytes {
			return fmt.Errorf("descriptor: multiaddr of %d bytes: %w", len(s), ErrBadAddress)
		}
		ma, err := multiaddr.NewMultiaddr(s)
		if err != nil {
			return fmt.Errorf("descriptor: multiaddr %q: %w: %v", s, ErrBadAddress, err)
		}
		if ma.String() != s {
			return fmt.Errorf("descriptor: multiaddr %q is not in canonical form %q: %w", s, ma.String(), ErrBadAddress)
		}
		if err := checkPeerIDs(ma, peerID.String()); err != nil {
			return fmt.Errorf("descriptor: multiaddr %q %w: %w", s, err, ErrBadAddress)
		}
	}
	for _, s := range a.Relays {
		if err := checkURL(s, lim, "ws", "wss"); err != nil {
			return err
		}
	}
	if a.Iroh != nil {
		if a.Iroh.EndpointID != identity.EndpointIDFromPublicKey(pub) {
			return fmt.Errorf("descriptor: iroh endpoint %q is not this node's key: %w", a.Iroh.EndpointID, ErrBadAddress)
		}
		if a.Iroh.RelayURL != "" {
			if err := checkURL(a.Iroh.RelayURL, lim, "http", "https"); err != nil {
				return err
			}
		}
		for _, s := range a.Iroh.Direct {
			ap, err := netip.ParseAddrPort(s)
			if err != nil || ap.Port() == 0 || ap.String() != s {
				return fmt.Errorf("descriptor: iroh direct address %q is not a canonical IP:port: %w", s, ErrBadAddress)
			}
		}
	}
	return nil
}

func checkURL(s string, lim Limits, schemes ...string) error {
	if len(s) > lim.MaxFieldBytes {
		return fmt.Errorf("descriptor: URL of %d bytes: %w", len(s), ErrBadAddress)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("descriptor: URL %q: %w: %v", s, ErrBadAddress, err)
	}
	ok := false
	for _, sc := range schemes {
		ok = ok || u.Scheme == sc
	}
	if !ok || u.Host == "" || u.Hostname() == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("descriptor: URL %q: want %s://host[:port][/path] without credentials or fragment: %w",
			s, strings.Join(schemes, " or "), ErrBadAddress)
	}
	return nil
}

func validateProtocols(ps []string, lim Limits) error {
	if len(ps) > lim.MaxProtocols {
		return fmt.Errorf("descriptor: %d protocols, at most %d: %w", len(ps), lim.MaxProtocols, ErrBadProtocol)
	}
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		if p == "" || len(p) > lim.MaxFieldBytes {
			return fmt.Errorf("descriptor: protocol id of %d bytes: %w", len(p), ErrBadProtocol)
		}
		for i := 0; i < len(p); i++ {
			if p[i] <= ' ' || p[i] > '~' {
				return fmt.Errorf("descriptor: protocol id %q has a space or non-printable byte: %w", p, ErrBadProtocol)
			}
		}
		if seen[p] {
			return fmt.Errorf("descriptor: protocol id %q repeated: %w", p, ErrBadProtocol)
		}
		seen[p] = true
	}
	return nil
}

func (o *Offers) validate() error {
	check := func(name string, bounds ...uint64) error {
		for _, b := range bounds {
			if b == 0 {
				return fmt.Errorf("descriptor: %s offer has a zero bound (omit the offer instead): %w", name, ErrBadOffer)
			}
		}
		return nil
	}
	if s := o.Storage; s != nil {
		if err := check("storage", s.MaxBytes, s.RetentionSeconds); err != nil {
			return err
		}
	}
	if c := o.CircuitRelay; c != nil {
		if err := check("circuit_relay", c.MaxReservations, c.MaxCircuitSeconds, c.MaxCircuitBytes); err != nil {
			return err
		}
	}
	if m := o.Mediation; m != nil {
		if err := check("mediation", m.MaxRecipients, m.MaxQueueMessages, m.MaxQueueBytes); err != nil {
			return err
		}
	}
	if c := o.Compute; c != nil {
		if err := check("compute", c.MaxConcurrentJobs, c.MaxFuel, c.MaxMemoryBytes); err != nil {
			return err
		}
	}
	if r := o.IrohRelay; r != nil {
		if err := check("iroh_relay", r.MaxClients, r.BytesPerSecond); err != nil {
			return err
		}
		return r.validate()
	}
	return nil
}

// CheckTime checks the descriptor's validity window against now.
func (d *Descriptor) CheckTime(now time.Time, lim Limits) error {
	t := now.Unix()
	if d.IssuedAt > t+int64(lim.ClockSkew/time.Second) {
		return fmt.Errorf("descriptor: %s: issued at %d, now %d: %w", d.DID, d.IssuedAt, t, ErrNotYetValid)
	}
	if t >= d.Expires {
		return fmt.Errorf("descriptor: %s: expired at %d, now %d: %w", d.DID, d.Expires, t, ErrExpired)
	}
	return nil
}
