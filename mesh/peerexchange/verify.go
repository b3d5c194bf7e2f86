package peerexchange

import (
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
)

// VerifyWith returns the Verifier the node uses: v checks the
// JWS, the validity window and refuses replays (spec/descriptor.md); this
// reads the node's PeerID from its DID and its libp2p multiaddrs.
func VerifyWith(v *descriptor.Verifier) Verifier {
	return func(raw []byte) (Info, error) {
		s, err := v.Accept(raw)
		if err != nil {
			return Info{}, err
		}
		d := &s.Descriptor
		id, err := identity.PeerIDFromDID(d.DID)
		if err != nil {
			return Info{}, fmt.Errorf("peerexchange: descriptor of %s: %w", d.DID, err)
		}
		// A leaf sleeps and wakes: it never counts as a storage node,
		// whatever it offers (spec/mesh-placement.md).
		storage := d.Offers.Storage != nil && d.Class != descriptor.ClassLeaf
		info := Info{
			ID:      id,
			Seq:     d.Seq,
			Expires: time.Unix(d.Expires, 0),
			Relay:   d.Class == descriptor.ClassAnchor || d.Offers.CircuitRelay != nil,
			Storage: storage,
			Class:   string(d.Class),
			Iroh:    d.Addresses.Iroh,
		}
		if d.Offers.IrohRelay != nil && d.Class == descriptor.ClassAnchor {
			info.IrohRelay = d.Offers.IrohRelay.URL
		}
		for _, s := range d.Addresses.Libp2p {
			a, err := ma.NewMultiaddr(s)
			if err != nil {
				return Info{}, fmt.Errorf("peerexchange: descriptor of %s: address %q: %w", d.DID, s, err)
			}
			if transport, last := ma.SplitLast(a); last != nil && last.Protocol().Code == ma.P_P2P {
				if peer.ID(last.RawValue()) != id {
					return Info{}, fmt.Errorf("peerexchange: descriptor of %s lists an address of another peer: %s", d.DID, s)
				}
				a = transport
			}
			if len(a) > 0 {
				info.Addrs = append(info.Addrs, a)
			}
		}
		return info, nil
	}
}
