package mesh

import (
	"errors"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/mesh/peerexchange"
)

// errNoPEX is returned by calls that need peer exchange when the mesh has
// no Hooks.VerifyDescriptor.
var errNoPEX = errors.New("mesh: peer exchange is off (no Hooks.VerifyDescriptor)")

// peerExchange is the part of c that bounds peer exchange.
func (c Config) peerExchange() peerexchange.Config {
	return peerexchange.Config{
		MaxDescriptors:     c.PEXMaxDescriptors,
		MaxDescriptorBytes: c.PEXMaxDescriptorBytes,
		KnownMax:           c.PEXKnownMax,
		Timeout:            c.PEXTimeout,
		Concurrency:        c.PEXConcurrency,
		NewsFanout:         c.PEXNewsFanout,
		NewsInterval:       c.PEXNewsInterval,
		Round:              c.MaintainInterval,
		MaxTracked:         maxScored,
	}
}

// pexHooks are how peer exchange reports to the mesh: its goroutines are
// the mesh's, its penalties go to the misbehaviour scores, a descriptor
// learnt goes to discovery and the address book, and a change among
// storage nodes to the placer.
func (m *Mesh) pexHooks() peerexchange.Hooks {
	return peerexchange.Hooks{
		Go: m.goroutine,
		Penalize: func(id peer.ID, o peerexchange.Offence) {
			reason := MisbehaviorPEXViolation
			if o == peerexchange.Flood {
				reason = MisbehaviorPEXFlood
			}
			m.misb.penalize(id, reason)
		},
		Learnt: func(info peerexchange.Info) {
			// New addresses (a relay address, say) are a new chance to
			// reach a peer that failed before.
			m.disc.forgetFailure(info.ID)
			// Not seen by us yet: a zero last-seen time ranks the peer
			// below every peer we have actually reached.
			m.book.Observe(info.ID, info.Addrs, time.Time{})
		},
		Dial:           m.wakeMaintainer,
		StorageChanged: m.placer.poke,
		Logger:         m.log,
	}
}

// SetLocalDescriptor sets the signed descriptor this node hands out in peer
// exchange. It must verify with Hooks.VerifyDescriptor and name this node.
// The node calls it again whenever it re-signs its descriptor.
func (m *Mesh) SetLocalDescriptor(raw []byte) error {
	if m.pex == nil {
		return errNoPEX
	}
	return m.pex.SetSelf(raw)
}

// Descriptor returns the newest verified, unexpired descriptor the mesh
// holds for id (this node's own included).
func (m *Mesh) Descriptor(id peer.ID) ([]byte, bool) {
	if m.pex == nil {
		return nil, false
	}
	return m.pex.Descriptor(id)
}

// PeerExchange is the mesh's peer exchange, nil without
// Hooks.VerifyDescriptor. The node serves it over iroh as well and gives
// it its transport chooser (SetTransport).
func (m *Mesh) PeerExchange() *peerexchange.Service { return m.pex }
