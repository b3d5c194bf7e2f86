package announce

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
)

// The bounds of one relay's answer (spec/announce.md "Finding peers",
// spec/limits.md "Announcements"): MaxFound events a query, MaxPages
// queries walking back in time, and of what verifies MaxDials nodes
// dialled, MaxAddrs addresses each. MaxKnown bounds the DIDs asked for by
// name.
const (
	MaxFound = 256
	MaxPages = 8
	MaxDials = 16
	MaxAddrs = 4
	MaxKnown = 64
)

// Found is what Find learned from one relay.
type Found struct {
	// Descriptors are the valid descriptors, the newest (highest seq) per
	// DID, in the order the relay sent them.
	Descriptors []*descriptor.Signed
	// Refused counts the announcements that did not verify; frames that
	// are not NIP-01 messages at all are skipped uncounted, as a client
	// skips what it cannot read.
	Refused int
	// author is the announcement key (x-only) that published each DID's
	// descriptor; known the DIDs Find was told were reachable.
	author map[string][32]byte
	known  map[string]bool
}

// Find asks the relay at url for node announcements and verifies each at
// now. An announcement that does not verify is counted and left out; only
// a relay that cannot be asked is an error. It reads the newest MaxFound
// announcements, then walks back in time (NIP-01 until) for up to
// MaxPages pages in all, so that a flood of newer announcements does not
// hide the older ones; known DIDs, those the caller has seen reachable,
// are asked for by name (#d) first, so that no flood hides them.
func Find(ctx context.Context, url string, now time.Time, known ...string) (Found, error) {
	if err := CheckRelayURL(url); err != nil {
		return Found{}, err
	}
	f := Found{author: map[string][32]byte{}, known: map[string]bool{}}
	at := map[string]int{}
	lim := descriptor.DefaultLimits()
	seen := map[[32]byte]bool{}
	take := func(evs []*nostr.Event) {
		for _, ev := range evs {
			if seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
			d, err := VerifyEvent(ev, now, lim)
			if err != nil {
				f.Refused++
				continue
			}
			did := d.Descriptor.DID
			if i, ok := at[did]; ok {
				if d.Descriptor.Seq > f.Descriptors[i].Descriptor.Seq {
					f.Descriptors[i], f.author[did] = d, ev.PubKey
				}
				continue
			}
			at[did] = len(f.Descriptors)
			f.author[did] = ev.PubKey
			f.Descriptors = append(f.Descriptors, d)
		}
	}
	if len(known) > 0 {
		known = known[:min(len(known), MaxKnown)]
		for _, did := range known {
			f.known[did] = true
		}
		evs, err := query(ctx, url, nostr.Filter{Kinds: []int{Kind}, Tags: map[string][]string{"d": known}, Limit: MaxFound, HasLimit: true}, MaxFound)
		if err != nil && len(evs) == 0 {
			return Found{}, err
		}
		take(evs)
	}
	filter := nostr.Filter{Kinds: []int{Kind}, Limit: MaxFound, HasLimit: true}
	for page := range MaxPages {
		evs, err := query(ctx, url, filter, MaxFound)
		if err != nil && len(evs) == 0 {
			if page == 0 && len(f.Descriptors) == 0 {
				return Found{}, err
			}
			break
		}
		take(evs)
		if len(evs) < MaxFound {
			break
		}
		oldest := evs[0].CreatedAt
		for _, ev := range evs {
			oldest = min(oldest, ev.CreatedAt)
		}
		if oldest <= 0 || (filter.HasUntil && oldest-1 >= filter.Until) {
			break
		}
		filter.Until, filter.HasUntil = oldest-1, true
	}
	return f, nil
}

// Pick chooses whom of the found nodes other than self (a DID) to dial:
// the known ones first, then one node per announcement key, in random
// order, so that an author who publishes many descriptors counts once and
// the order of the relay's answer decides nothing; at most MaxDials nodes.
func (f Found) Pick(self string) []*descriptor.Signed {
	var known, rest []*descriptor.Signed
	authors := map[[32]byte]bool{}
	for _, d := range f.Descriptors {
		did := d.Descriptor.DID
		switch {
		case did == self:
		case f.known[did]:
			known = append(known, d)
		case !authors[f.author[did]]:
			authors[f.author[did]] = true
			rest = append(rest, d)
		}
	}
	rand.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	out := append(known, rest...)
	return out[:min(len(out), MaxDials)]
}

// Bootstrap are the libp2p addresses of the nodes Pick chooses, at most
// MaxAddrs each, each ending in its node's /p2p/<PeerID>, as
// `--bootstrap` takes them.
func (f Found) Bootstrap(self string) []string {
	var out []string
	for _, d := range f.Pick(self) {
		id, err := identity.PeerIDFromDID(d.Descriptor.DID)
		if err != nil {
			continue // descriptor.Verify checked the DID
		}
		suffix := "/p2p/" + id.String()
		for _, a := range d.Descriptor.Addresses.Libp2p[:min(len(d.Descriptor.Addresses.Libp2p), MaxAddrs)] {
			if !strings.HasSuffix(a, suffix) {
				a += suffix
			}
			out = append(out, a)
		}
	}
	return out
}

// String summarises what was found, for the log.
func (f Found) String() string {
	return fmt.Sprintf("%d nodes (%d announcements refused)", len(f.Descriptors), f.Refused)
}
