package announce

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/nostr"
)

// Kind is the event kind of a node announcement: addressable (NIP-01), so
// a relay keeps the latest per announcement key and `d` tag, beside
// NIP-66's relay discovery kind 30166 whose manner it follows.
const Kind = 31166

// alt is the NIP-31 description a client that does not know Kind shows.
const alt = "fleetmesh node descriptor (a mesh peer to bootstrap from; spec/announce.md)"

// MaxEventBytes bounds an announcement event's JSON: a descriptor at its
// largest plus the event around it.
const MaxEventBytes = 24 << 10

// Errors of ParseEvent besides the descriptor's own (package descriptor's
// Err* values, wrapped as they are).
var (
	// ErrNotAnnouncement: the event is not of Kind, has no `d` tag, or is
	// larger than MaxEventBytes.
	ErrNotAnnouncement = errors.New("not a fleetmesh node announcement")
	// ErrBadEvent: the event's id or signature does not verify.
	ErrBadEvent = errors.New("announcement event id or signature does not verify")
	// ErrMismatch: the `d` tag or expiration is not the descriptor's.
	ErrMismatch = errors.New("announcement tags do not match its descriptor")
)

// NewEvent is the announcement of a signed descriptor, signed by the
// announcement key sk at createdAt (Unix seconds).
func NewEvent(sk nostr.SecretKey, d *descriptor.Signed, createdAt int64) (*nostr.Event, error) {
	ev := &nostr.Event{
		CreatedAt: createdAt,
		Kind:      Kind,
		Tags: nostr.Tags{
			{"d", d.Descriptor.DID},
			{"expiration", strconv.FormatInt(d.Descriptor.Expires, 10)},
			{"alt", alt},
		},
		Content: string(d.JWS),
	}
	if err := sk.Sign(ev); err != nil {
		return nil, fmt.Errorf("announce: %w", err)
	}
	return ev, nil
}

// ParseEvent decodes an announcement event's JSON and verifies it at now:
// the event's id and signature, then the descriptor in its content
// (signature, rules, validity), and that the `d` tag names the
// descriptor's DID and the expiration is the descriptor's.
func ParseEvent(raw []byte, now time.Time, lim descriptor.Limits) (*descriptor.Signed, error) {
	if len(raw) > MaxEventBytes {
		return nil, fmt.Errorf("announce: event of %d bytes, at most %d: %w", len(raw), MaxEventBytes, ErrNotAnnouncement)
	}
	var ev nostr.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("announce: %v: %w", err, ErrNotAnnouncement)
	}
	return VerifyEvent(&ev, now, lim)
}

// VerifyEvent is ParseEvent for a decoded event.
func VerifyEvent(ev *nostr.Event, now time.Time, lim descriptor.Limits) (*descriptor.Signed, error) {
	if n := len(ev.AppendJSON(nil)); n > MaxEventBytes {
		return nil, fmt.Errorf("announce: event of %d bytes, at most %d: %w", n, MaxEventBytes, ErrNotAnnouncement)
	}
	if ev.Kind != Kind {
		return nil, fmt.Errorf("announce: kind %d, want %d: %w", ev.Kind, Kind, ErrNotAnnouncement)
	}
	did := ev.DTag()
	if did == "" {
		return nil, fmt.Errorf("announce: no d tag: %w", ErrNotAnnouncement)
	}
	if err := ev.Verify(); err != nil {
		return nil, fmt.Errorf("announce: %v: %w", err, ErrBadEvent)
	}
	d, err := descriptor.Verify([]byte(ev.Content), now, lim)
	if err != nil {
		return nil, fmt.Errorf("announce: %w", err)
	}
	if d.Descriptor.DID != did {
		return nil, fmt.Errorf("announce: d tag %q, descriptor of %s: %w", did, d.Descriptor.DID, ErrMismatch)
	}
	if exp, ok := ev.Expiration(); !ok || exp != d.Descriptor.Expires {
		return nil, fmt.Errorf("announce: expiration tag is not the descriptor's %d: %w", d.Descriptor.Expires, ErrMismatch)
	}
	return d, nil
}
