package label

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
)

// Kind is NIP-32's label event kind.
const Kind = 1985

// KindReport is NIP-56's report kind: a node counts reports only from
// the Nostr keys its operator lists (Config.Reporters).
const KindReport = 1984

// Namespace is the label namespace (NIP-32 `L`) of every fleetmesh
// label: the reverse domain name NIP-32 recommends for a vocabulary of
// one's own.
const Namespace = "org.fleetmesh.label"

// SignaturePrefix is prepended to a label's signed bytes, so that a label
// signature is never valid as one over any other fleetmesh record.
const SignaturePrefix = "fleetmesh label v1\x00"

// MaxNoteBytes bounds a label's free-text note (the event content).
const MaxNoteBytes = 1024

// MaxEventBytes bounds a label event's serialization: a note at its
// longest, a disputed receipt (about 1 KiB) in base64 and the tags.
const MaxEventBytes = 8 << 10

// Reason is why a label was given: NIP-56's report types, and
// Misbehaving for a node.
type Reason string

// The vocabulary (spec/labels.md "Reasons").
const (
	Spam          Reason = "spam"
	Nudity        Reason = "nudity"
	Malware       Reason = "malware"
	Profanity     Reason = "profanity"
	Illegal       Reason = "illegal"
	Impersonation Reason = "impersonation"
	Other         Reason = "other"
	// Misbehaving is a node's: it needs a dispute behind it.
	Misbehaving Reason = "misbehaving"
)

// Reasons lists the vocabulary in a fixed order.
var Reasons = []Reason{Spam, Nudity, Malware, Profanity, Illegal, Impersonation, Other, Misbehaving}

// ParseReason reads a reason, naming the vocabulary if s is not in it.
func ParseReason(s string) (Reason, error) {
	if slices.Contains(Reasons, Reason(s)) {
		return Reason(s), nil
	}
	names := make([]string, len(Reasons))
	for i, r := range Reasons {
		names[i] = string(r)
	}
	return "", fmt.Errorf("reason %q: want one of %s", s, strings.Join(names, ", "))
}

// TargetKind is what a label names.
type TargetKind string

// The targets and the tags that name them (spec/labels.md "Targets").
const (
	Author TargetKind = "p" // a Nostr pubkey, 64 hex
	Event  TargetKind = "e" // an event id, 64 hex
	Blob   TargetKind = "x" // a blob's SHA-256, 64 hex (NIP-94's `x`)
	Node   TargetKind = "r" // a node's did:key (a URI, NIP-32's `r`)
)

// Target is one thing a label names.
type Target struct {
	Kind  TargetKind
	Value string
}

// String is "p:<hex>", "e:<hex>", "x:<hex>" or "r:did:key:…": the key the
// index and the policy use.
func (t Target) String() string { return string(t.Kind) + ":" + t.Value }

// Check refuses a target whose value is not of its kind's form.
func (t Target) Check() error {
	switch t.Kind {
	case Author, Event, Blob:
		if len(t.Value) != 64 || !isLowerHex(t.Value) {
			return fmt.Errorf("target %s: want 64 lowercase hex digits", t.Kind)
		}
	case Node:
		if _, err := identity.PublicKeyFromDID(t.Value); err != nil || !strings.HasPrefix(t.Value, "did:key:") {
			return fmt.Errorf("target node %q: want a did:key DID", t.Value)
		}
	default:
		return fmt.Errorf("target %q: want p (author), e (event), x (blob) or r (node)", t.Kind)
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Label is one node's label, as published and as verified.
type Label struct {
	// ID is the label event's id.
	ID [32]byte
	// Labeller is the DID of the node whose key signed the label.
	Labeller string
	// PubKey is the Nostr key that published the event (the node's label
	// key); a retraction must come from it.
	PubKey [32]byte
	Reason Reason
	Target Target
	// Note is free text for people (the event content).
	Note string
	// Created is the event's created_at; Expires its NIP-40 expiration
	// (0: none).
	Created int64
	Expires int64
	// Dispute is the disputed receipt behind a label about a node: the
	// labeller's record of a window with that node it reported disputed.
	Dispute *receipt.Receipt
}

// Errors of Parse, each wrapped with the detail.
var (
	// ErrNotLabel: not a kind 1985 event in this namespace.
	ErrNotLabel = errors.New("not a fleetmesh label")
	// ErrMalformed: a label whose tags or content break spec/labels.md.
	ErrMalformed = errors.New("malformed label")
	// ErrSignature: the node key's signature does not verify.
	ErrSignature = errors.New("label signature does not verify")
)

// New is a label of reason about target by the node key, published by
// the label key sk at created (Unix seconds); expires 0 means none. A
// label about a node carries dispute, the node's own disputed receipt
// with it; others carry none.
func New(key *identity.Key, sk nostr.SecretKey, reason Reason, target Target, note string, created, expires int64, dispute *receipt.Receipt) (*nostr.Event, error) {
	tags := nostr.Tags{{"L", Namespace}, {"l", string(reason), Namespace}, {string(target.Kind), target.Value}}
	if expires != 0 {
		tags = append(tags, []string{"expiration", strconv.FormatInt(expires, 10)})
	}
	if dispute != nil {
		c, err := dispute.CID()
		if err != nil {
			return nil, fmt.Errorf("label: %w", err)
		}
		raw, err := dispute.Encode()
		if err != nil {
			return nil, fmt.Errorf("label: %w", err)
		}
		tags = append(tags, []string{"dispute", c.String(), base64.RawURLEncoding.EncodeToString(raw)})
	}
	tags = append(tags, []string{"did", key.DID(), ""})
	ev := &nostr.Event{CreatedAt: created, Kind: Kind, Tags: tags, Content: note, PubKey: sk.PubKey()}
	// Checked as a reader would, before signing: a label this node
	// publishes is one every node takes.
	if _, err := check(ev); err != nil {
		return nil, err
	}
	sig := key.Sign(signingBytes(ev))
	ev.Tags[len(ev.Tags)-1][2] = base64.RawURLEncoding.EncodeToString(sig)
	if err := sk.Sign(ev); err != nil {
		return nil, fmt.Errorf("label: %w", err)
	}
	return ev, nil
}

// signingBytes are what the node key signs: SignaturePrefix and the
// event's NIP-01 serialization with the `did` tag's signature empty, so
// that it covers the publishing Nostr key, the time, every tag and the
// note.
func signingBytes(ev *nostr.Event) []byte {
	c := *ev
	c.Tags = slices.Clone(ev.Tags)
	last := len(c.Tags) - 1
	c.Tags[last] = []string{"did", c.Tags[last][1], ""}
	return c.Serialize([]byte(SignaturePrefix))
}

// Parse reads and verifies a label event whose NIP-01 id and signature
// the caller verified (the relay does, for every event): its form
// (spec/labels.md "The event"), and the node key's signature. It does not
// judge the dispute behind a node label beyond its form and signer: the
// policy does (Policy.Verdict), against what the reading node holds.
func Parse(ev *nostr.Event) (*Label, error) {
	l, err := check(ev)
	if err != nil {
		return nil, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(ev.Tags[len(ev.Tags)-1][2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("label: %w: the did tag's signature is not 64 bytes of base64url", ErrMalformed)
	}
	pub, _ := identity.PublicKeyFromDID(l.Labeller)
	if !ed25519.Verify(pub, signingBytes(ev), sig) {
		return nil, fmt.Errorf("label: %w: by %s", ErrSignature, l.Labeller)
	}
	return l, nil
}

// check reads a label event's form; the did tag's signature is not read.
func check(ev *nostr.Event) (*Label, error) {
	bad := func(format string, args ...any) (*Label, error) {
		return nil, fmt.Errorf("label: %w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	if ev.Kind != Kind {
		return nil, fmt.Errorf("label: %w: kind %d, want %d", ErrNotLabel, ev.Kind, Kind)
	}
	if len(ev.Content) > MaxNoteBytes {
		return bad("note of %d bytes, at most %d", len(ev.Content), MaxNoteBytes)
	}
	// Label events of other namespaces are other people's: not an error.
	ours := false
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "L" {
			if t[1] != Namespace {
				return nil, fmt.Errorf("label: %w: namespace %q", ErrNotLabel, t[1])
			}
			ours = true
		}
	}
	if !ours {
		return nil, fmt.Errorf("label: %w: no [\"L\", %q] tag", ErrNotLabel, Namespace)
	}
	l := &Label{ID: ev.ID, PubKey: ev.PubKey, Note: ev.Content, Created: ev.CreatedAt}
	var ns, did, target, exp, dispute bool
	var disputeCID, disputeRaw string
	for i, t := range ev.Tags {
		if len(t) == 0 {
			return bad("an empty tag")
		}
		switch name := t[0]; name {
		case "L":
			if len(t) != 2 || ns {
				return bad(`want one ["L", %q]`, Namespace)
			}
			ns = true
		case "l":
			if len(t) != 3 || t[2] != Namespace || l.Reason != "" {
				return bad(`want one ["l", reason, %q]`, Namespace)
			}
			r, err := ParseReason(t[1])
			if err != nil {
				return bad("%v", err)
			}
			l.Reason = r
		case string(Author), string(Event), string(Blob), string(Node):
			if len(t) != 2 || target {
				return bad("want exactly one target tag (p, e, x or r) of two elements")
			}
			l.Target = Target{TargetKind(name), t[1]}
			if err := l.Target.Check(); err != nil {
				return bad("%v", err)
			}
			target = true
		case "expiration":
			n, err := strconv.ParseInt(safeIndex(t, 1), 10, 64)
			if len(t) != 2 || exp || err != nil || n <= 0 {
				return bad("expiration: want one [\"expiration\", unix seconds]")
			}
			l.Expires, exp = n, true
		case "dispute":
			if len(t) != 3 || dispute {
				return bad(`want at most one ["dispute", cid, receipt]`)
			}
			disputeCID, disputeRaw, dispute = t[1], t[2], true
		case "did":
			if i != len(ev.Tags)-1 || len(t) != 3 {
				return bad(`the ["did", DID, signature] tag must be the last`)
			}
			if _, err := identity.PublicKeyFromDID(t[1]); err != nil || !strings.HasPrefix(t[1], "did:key:") {
				return bad("did %q: want the labeller's did:key", t[1])
			}
			l.Labeller, did = t[1], true
		default:
			return bad("unknown tag %q", name)
		}
	}
	switch {
	case l.Reason == "":
		return bad("no l tag")
	case !target:
		return bad("no target tag (p, e, x or r)")
	case !did:
		return bad("no did tag")
	case (l.Target.Kind == Node) != (l.Reason == Misbehaving):
		return bad("a node (r) is labelled misbehaving, and only a node is")
	case l.Target.Kind == Node && !dispute:
		return bad("a label about a node carries the dispute behind it ([\"dispute\", cid, receipt])")
	case dispute && l.Target.Kind != Node:
		return bad("only a label about a node carries a dispute")
	case l.Target.Kind == Node && l.Target.Value == l.Labeller:
		return bad("a node does not label itself")
	}
	if dispute {
		r, err := decodeDispute(disputeCID, disputeRaw)
		if err != nil {
			return bad("%v", err)
		}
		if !r.Has(l.Labeller) || !r.Has(l.Target.Value) {
			return bad("the dispute is not between the labeller and the node it labels")
		}
		if sig := r.SigA; (r.A == l.Labeller) != (sig != nil) {
			return bad("the disputed receipt is not signed by the labeller")
		}
		l.Dispute = r
	}
	return l, nil
}

func safeIndex(t []string, i int) string {
	if i < len(t) {
		return t[i]
	}
	return ""
}

// decodeDispute reads a dispute tag: a disputed receipt, verified, whose
// CID is c.
func decodeDispute(c, raw string) (*receipt.Receipt, error) {
	want, err := cid.Decode(c)
	if err != nil {
		return nil, fmt.Errorf("dispute cid %q: %v", c, err)
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("dispute receipt: not base64url: %v", err)
	}
	r, err := receipt.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("dispute: %v", err)
	}
	if !r.Disputed {
		return nil, errors.New("dispute: the receipt is not a disputed one")
	}
	got, err := r.CID()
	if err != nil || !got.Equals(want) {
		return nil, fmt.Errorf("dispute: the receipt's CID is %s, not %s", got, c)
	}
	if err := r.Verify(); err != nil {
		return nil, fmt.Errorf("dispute: %v", err)
	}
	return r, nil
}

// Retract is the NIP-09 deletion of the labels ids by the label key sk,
// which published them, at created.
func Retract(sk nostr.SecretKey, created int64, ids ...[32]byte) (*nostr.Event, error) {
	tags := nostr.Tags{}
	for _, id := range ids {
		tags = append(tags, []string{"e", hex.EncodeToString(id[:])})
	}
	tags = append(tags, []string{"k", strconv.Itoa(Kind)})
	ev := &nostr.Event{CreatedAt: created, Kind: nostr.KindDeletion, Tags: tags, Content: "label retracted"}
	if err := sk.Sign(ev); err != nil {
		return nil, fmt.Errorf("label: %w", err)
	}
	return ev, nil
}

// Retracted returns the ids a NIP-09 deletion event names (its `e`
// tags); it takes effect on the labels its own pubkey published.
func Retracted(ev *nostr.Event) [][32]byte {
	if ev.Kind != nostr.KindDeletion {
		return nil
	}
	var out [][32]byte
	for _, t := range ev.Tags {
		var id [32]byte
		if len(t) >= 2 && t[0] == "e" && nostr.DecodeHex(id[:], t[1]) == nil {
			out = append(out, id)
		}
	}
	return out
}

// DisputeCID is the CID of the dispute behind l, "" if none.
func (l *Label) DisputeCID() string {
	if l.Dispute == nil {
		return ""
	}
	c, err := l.Dispute.CID()
	if err != nil {
		return ""
	}
	return c.String()
}

// IDHex is the label's id in hex.
func (l *Label) IDHex() string { return hex.EncodeToString(l.ID[:]) }
