package meter

import (
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// The relay's Served hook counts events and bytes with the DID's node,
// each way, and ignores a party that is not a did:key.
func TestRelayServed(t *testing.T) {
	k, _ := identity.GenerateKey()
	m := New("self", time.Hour, time.Now())
	served := RelayServed(m)
	served(k.DID(), true, 300)
	served(k.DID(), true, 200)
	served(k.DID(), false, 90)
	served("not-a-did", true, 1)
	sides := m.Current().Sides()
	s := sides[k.PeerID()]
	if len(sides) != 1 || s.Gave.Events != 2 || s.Gave.Bytes != 500 || s.Received.Events != 1 || s.Received.Bytes != 90 {
		t.Fatalf("sides: %+v", sides)
	}
}
