package accounting

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/identity"
)

// contactQueue bounds the connections waiting to be noted as first
// contacts; one arriving while it is full is noted at its next
// connection.
const contactQueue = 256

// A pair's first contact (firstContact) bounds the windows a peer can
// make this node keep. Figures are saved when their window closes, so a
// node killed at a close loses the first window's figures, and with them
// its only record of the contact: its peer's proposal for that window,
// which spec/disputes.md wants it to answer and report disputed, would be
// refused. The contact is therefore noted durably when a peer first
// connects, before any traffic, and kept for a dispute period.

// noteConnections has the host's new connections noted as contacts.
func (s *Service) noteConnections(ctx context.Context) {
	if s.host == nil {
		return
	}
	queue := func(p peer.ID) {
		select {
		case s.contacts <- p:
		default:
		}
	}
	n := &network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) { queue(c.RemotePeer()) }}
	s.host.Network().Notify(n)
	for _, p := range s.host.Network().Peers() { // connected before Notify
		queue(p)
	}
	s.relayWG.Go(func() {
		defer s.host.Network().StopNotify(n)
		noted := map[peer.ID]bool{}
		for {
			select {
			case <-ctx.Done():
				return
			case p := <-s.contacts:
				if noted[p] {
					continue
				}
				if len(noted) >= contactQueue*16 {
					clear(noted) // looked up in the database again
				}
				noted[p] = true
				if err := s.noteContact(p); err != nil {
					s.log.Warn("accounting: noting a first contact", "peer", p, "err", err)
				}
			}
		}
	})
}

// noteContact records the meter's current window as the first contact
// with p unless one is recorded.
func (s *Service) noteContact(p peer.ID) error {
	did, err := identity.DIDFromPeerID(p)
	if err != nil {
		return nil // not an Ed25519 peer: never an accounting counterparty
	}
	return s.db.b.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bContacts)
		if b.Get([]byte(did)) != nil {
			return nil
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(s.meter.Current().Start))
		return b.Put([]byte(did), v[:])
	})
}

// contactOf is the first contact noted with peer, if any.
func contactOf(tx *bolt.Tx, peer string) (int64, bool) {
	v := tx.Bucket(bContacts).Get([]byte(peer))
	if len(v) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

// pruneContacts drops the contacts noted before the longest dispute
// period ending now: past it no window of theirs can be kept anyway, and
// a pair with history has its receipts or disputed windows for
// firstContact.
func (s *Service) pruneContacts(now time.Time) error {
	oldest := now.Add(-max(s.cfg.DisputePeriod.Duration, s.cfg.LeafDisputePeriod) - time.Duration(s.meter.Length())*time.Second).Unix()
	return s.db.b.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bContacts).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < oldest {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
