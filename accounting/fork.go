package accounting

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
)

// ForkProofBody carries a fork proof's canonical bytes.
type ForkProofBody struct {
	Proof []byte `json:"proof"`
}

// forkRelayQueue bounds the fork proofs waiting to be relayed
// (spec/limits.md "Accounting"): a proof that finds it full is kept but
// not relayed, so a flood of proofs costs the handler no wait.
const forkRelayQueue = 64

// relayItem is a proof to send to every connected peer but from.
type relayItem struct {
	raw  []byte
	from string
}

// forkFound builds, keeps and spreads the proof of two receipts.
func (s *Service) forkFound(x, y *receipt.Receipt) {
	p, err := receipt.NewForkProof(x, y)
	if err != nil {
		s.log.Warn("accounting: not a fork after all", "err", err)
		return
	}
	s.m.forkProofs.WithLabelValues("built").Inc()
	s.log.Warn("accounting: fork proof", "pair", x.PairKey(), "seq", x.Seq)
	s.keepAndSpread(p, "", true)
}

// keepAndSpread stores a verified proof if it names a forker this node
// holds no proof of, and queues it to be relayed once to every connected
// peer but the one it came from. Both DIDs of the forked pair signed both
// receipts, so both are forkers: one proof per forker is enough to show
// what it did, and a further proof of forkers already shown is neither
// kept nor relayed. Proofs from others are kept for at most
// MaxForkProofs forkers; a proof this node built itself (built) always.
// The check and the store are one transaction, so a proof arriving from
// two peers at once, or again after a restart, is relayed once.
func (s *Service) keepAndSpread(p *receipt.ForkProof, from string, built bool) bool {
	id, err := p.ID()
	if err != nil {
		return false
	}
	x, _, err := p.Verify()
	if err != nil {
		return false
	}
	raw, _ := p.Encode()
	kept, added := false, 0
	if err := s.db.b.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bForks).Get(id.Bytes()) != nil {
			return nil
		}
		var fresh []string
		for _, did := range []string{x.A, x.B} {
			if tx.Bucket(bForkers).Get([]byte(did)) == nil {
				fresh = append(fresh, did)
			}
		}
		if len(fresh) == 0 || (!built && int(s.forkers.Load())+len(fresh) > s.cfg.MaxForkProofs) {
			return nil
		}
		for _, did := range fresh {
			if err := tx.Bucket(bForkers).Put([]byte(did), id.Bytes()); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bForks).Put(id.Bytes(), raw); err != nil {
			return err
		}
		// Counted in the transaction: writers are serialised, so the
		// next one's check sees this one's forkers.
		kept, added = true, len(fresh)
		s.forkers.Add(int64(added))
		return nil
	}); err != nil {
		if kept {
			s.forkers.Add(-int64(added))
		}
		s.log.Warn("accounting: storing a fork proof", "err", err)
		return false
	}
	if !kept {
		return false
	}
	select {
	case s.relay <- relayItem{raw: raw, from: from}:
	default:
		s.log.Warn("accounting: fork proof kept, not relayed: the relay queue is full", "pair", x.PairKey())
	}
	return true
}

// relayForks sends each queued proof to every connected peer but the one
// it came from, until ctx ends.
func (s *Service) relayForks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-s.relay:
			s.relayFork(ctx, it)
		}
	}
}

func (s *Service) relayFork(ctx context.Context, it relayItem) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, pid := range s.host.Network().Peers() {
		did, err := identity.DIDFromPeerID(pid)
		if err != nil || did == it.from {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			m, _ := didcomm.NewMessage(exchange.TypeForkProof, ForkProofBody{Proof: it.raw})
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := s.agent.Request(cctx, did, m); err != nil && !isNoAnswer(err) {
				s.log.Debug("accounting: spreading a fork proof", "peer", did, "err", err)
			}
		}()
	}
	wg.Wait()
}

// loadForkers indexes by forker the proofs kept before the index existed
// and counts the forkers.
func (s *Service) loadForkers() error {
	n := 0
	err := s.db.b.Update(func(tx *bolt.Tx) error {
		fk := tx.Bucket(bForkers)
		if err := tx.Bucket(bForks).ForEach(func(k, v []byte) error {
			p, err := receipt.DecodeForkProof(v)
			if err != nil {
				return nil
			}
			x, _, _ := p.Verify()
			for _, did := range []string{x.A, x.B} {
				if fk.Get([]byte(did)) == nil {
					if err := fk.Put([]byte(did), k); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			return err
		}
		n = fk.Stats().KeyN
		return nil
	})
	s.forkers.Store(int64(n))
	return err
}

// handleForkProof verifies a proof with no trust in the sender, keeps it
// and queues it to be relayed; it never waits for the relaying.
func (s *Service) handleForkProof(msg *didcomm.Message) (*didcomm.Message, error) {
	var b ForkProofBody
	if err := json.Unmarshal(msg.Body, &b); err != nil {
		return nil, problem(didcomm.CodeMalformed, "fork-proof body: %v", err)
	}
	p, err := receipt.DecodeForkProof(b.Proof)
	if err != nil {
		s.m.forkProofs.WithLabelValues("refused").Inc()
		return nil, problem(exchange.CodeInvalid, "%v", err)
	}
	if s.keepAndSpread(p, msg.From, false) {
		s.m.forkProofs.WithLabelValues("received").Inc()
	}
	return nil, nil
}

// Disputes returns the records of the windows this node reported
// disputed, oldest first per pair.
func (s *Service) Disputes() ([]Dispute, error) {
	out := []Dispute{}
	err := s.db.b.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bDisputes).ForEach(func(_, v []byte) error {
			var d Dispute
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}

// ForkProofs returns the verified fork proofs this node holds.
func (s *Service) ForkProofs() ([]*receipt.ForkProof, error) {
	var out []*receipt.ForkProof
	err := s.db.b.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bForks).ForEach(func(_, v []byte) error {
			p, err := receipt.DecodeForkProof(v)
			if err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// handleDispute serves dispute/1.0: a peer's figures for a window, sent
// outside a proposal, are kept for the disputed receipt.
func (s *Service) handleDispute(_ context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
	msg := u.Message
	if msg.Type != exchange.TypeDisputeOpen || !u.Authenticated {
		return nil, problem(didcomm.CodeUnsupportedType, "dispute/1.0 takes authcrypted %s", exchange.TypeDisputeOpen)
	}
	var d exchange.DisputeBody
	if err := json.Unmarshal(msg.Body, &d); err != nil {
		return nil, problem(didcomm.CodeMalformed, "dispute body: %v", err)
	}
	return nil, s.db.b.Update(func(tx *bolt.Tx) error {
		k := key(msg.From, uint64(d.WindowStart))
		v := tx.Bucket(bPending).Get(k)
		if v == nil {
			return nil
		}
		var p pending
		if err := json.Unmarshal(v, &p); err != nil {
			return err
		}
		p.Theirs = &d.Counts
		p.theirs(d.Evidence)
		return putJSON(tx, bPending, k, p)
	})
}
