package announce

import (
	"context"
	"fmt"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
)

// MaxFound bounds the announcements Find reads from one relay.
const MaxFound = 256

// Found is what Find learned from one relay.
type Found struct {
	// Descriptors are the valid descriptors, the newest (highest seq) per
	// DID, in the order the relay sent them.
	Descriptors []*descriptor.Signed
	// Refused counts the announcements that did not verify; frames that
	// are not NIP-01 messages at all are skipped uncounted, as a client
	// skips what it cannot read.
	Refused int
}

// Find asks the relay at url for node announcements and verifies each at
// now. An announcement that does not verify is counted and left out; only
// a relay that cannot be asked is an error.
func Find(ctx context.Context, url string, now time.Time) (Found, error) {
	if err := CheckRelayURL(url); err != nil {
		return Found{}, err
	}
	evs, err := query(ctx, url, nostr.Filter{Kinds: []int{Kind}, Limit: MaxFound, HasLimit: true}, MaxFound)
	if err != nil && len(evs) == 0 {
		return Found{}, err
	}
	var f Found
	at := map[string]int{}
	lim := descriptor.DefaultLimits()
	for _, ev := range evs {
		d, err := VerifyEvent(ev, now, lim)
		if err != nil {
			f.Refused++
			continue
		}
		did := d.Descriptor.DID
		if i, ok := at[did]; ok {
			if d.Descriptor.Seq > f.Descriptors[i].Descriptor.Seq {
				f.Descriptors[i] = d
			}
			continue
		}
		at[did] = len(f.Descriptors)
		f.Descriptors = append(f.Descriptors, d)
	}
	return f, nil
}

// Bootstrap are the libp2p addresses of the found nodes other than self
// (a DID), each ending in its node's /p2p/<PeerID>, as `--bootstrap`
// takes them.
func (f Found) Bootstrap(self string) []string {
	var out []string
	for _, d := range f.Descriptors {
		if d.Descriptor.DID == self {
			continue
		}
		id, err := identity.PeerIDFromDID(d.Descriptor.DID)
		if err != nil {
			continue // descriptor.Verify checked the DID
		}
		suffix := "/p2p/" + id.String()
		for _, a := range d.Descriptor.Addresses.Libp2p {
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
