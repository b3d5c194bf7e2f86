package meter

import "fleetmesh.org/fleetmesh/identity"

// RelayServed returns the relay's Served hook for m: an event the relay
// sent to, or accepted from, a connection that named its DID (a leaf's
// DPoP proof, spec/leaf.md) is one event and its bytes given to, or
// received from, that DID's node. A party that is not a did:key is not
// counted.
func RelayServed(m *Meter) func(did string, sent bool, n int) {
	return func(did string, sent bool, n int) {
		p, err := identity.PeerIDFromDID(did)
		if err != nil {
			return
		}
		d := Received
		if sent {
			d = Gave
		}
		m.Record(p, Events, d, 1)
		m.Record(p, Bytes, d, uint64(n))
	}
}
