package accounting

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/receipt"
)

// The bounds on what a peer's messages can make this node keep
// (spec/limits.md "Accounting"). A window a peer names is kept only while
// its dispute period runs and only from the pair's first contact on, so
// one peer holds at most a dispute period's windows here and a DID this
// node never dealt with holds none.

// period is the dispute period of the pair with peer.
func (s *Service) period(peer string) time.Duration {
	if s.leaf(peer) {
		return s.cfg.LeafDisputePeriod
	}
	return s.cfg.DisputePeriod.Duration
}

// inPeriod refuses a window whose dispute period was over when this
// node's current window began (readyBefore: the clock the window loop
// keeps).
func (s *Service) inPeriod(peer string, start int64) error {
	end := time.Unix(start+s.meter.Length(), 0)
	if now := time.Unix(s.readyBefore.Load(), 0); now.After(end.Add(s.period(peer))) {
		return problem(didcomm.CodeExpired, "window %d: its dispute period (%s after its end) is over here", start, s.period(peer))
	}
	return nil
}

// firstContact is the earliest window this node holds anything of with
// peer in: figures waiting for the exchange, a receipt of the pair, a
// disputed window, or the peer's first connection (contact.go). ok is
// false if it holds nothing.
func firstContact(tx *bolt.Tx, peer, pair string) (first int64, ok bool) {
	take := func(w int64) {
		if !ok || w < first {
			first, ok = w, true
		}
	}
	pk := append([]byte(peer), 0)
	if k, _ := tx.Bucket(bPending).Cursor().Seek(pk); k != nil && bytes.HasPrefix(k, pk) {
		take(int64(binary.BigEndian.Uint64(k[len(pk):])))
	}
	pp := append([]byte(pair), 0)
	if k, v := tx.Bucket(bReceipts).Cursor().Seek(pp); k != nil && bytes.HasPrefix(k, pp) {
		if r, err := receipt.Decode(v); err == nil {
			take(r.WindowStart)
		}
	}
	if k, _ := tx.Bucket(bDisputed).Cursor().Seek(pp); k != nil && bytes.HasPrefix(k, pp) {
		take(int64(binary.BigEndian.Uint64(k[len(pp):])))
	}
	if w, noted := contactOf(tx, peer); noted {
		take(w)
	}
	return first, ok
}

// windowAllowed refuses a window of the pair with peer that this node
// holds no figures for, when its dispute period is over or it began
// before the pair's first contact: what a message about it would make
// this node keep (pending figures, then a disputed receipt and a report
// entry) is not of the pair's history.
func (s *Service) windowAllowed(tx *bolt.Tx, peer, pair string, start int64) error {
	if tx.Bucket(bPending).Get(key(peer, uint64(start))) != nil {
		return nil
	}
	if err := s.inPeriod(peer, start); err != nil {
		return err
	}
	first, ok := firstContact(tx, peer, pair)
	if !ok {
		return problem(exchange.CodeInvalid, "window %d: this node has no figures with %s for any window", start, peer)
	}
	if start < first {
		return problem(exchange.CodeInvalid, "window %d is before this node's first contact with %s (window %d)", start, peer, first)
	}
	return nil
}
