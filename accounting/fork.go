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

// forkFound builds, keeps and spreads the proof of two receipts.
func (s *Service) forkFound(x, y *receipt.Receipt) {
	p, err := receipt.NewForkProof(x, y)
	if err != nil {
		s.log.Warn("accounting: not a fork after all", "err", err)
		return
	}
	s.m.forkProofs.WithLabelValues("built").Inc()
	s.log.Warn("accounting: fork proof", "pair", x.PairKey(), "seq", x.Seq)
	s.keepAndSpread(context.Background(), p, "")
}

// keepAndSpread stores a verified proof the first time it is seen and
// sends it to every connected peer but the one it came from. A proof is
// seen once it is stored: the check and the store are one transaction, so
// a proof arriving from two peers at once, or again after a restart, is
// spread once.
func (s *Service) keepAndSpread(ctx context.Context, p *receipt.ForkProof, from string) bool {
	id, err := p.ID()
	if err != nil {
		return false
	}
	raw, _ := p.Encode()
	seen := false
	if err := s.db.b.Update(func(tx *bolt.Tx) error {
		if seen = tx.Bucket(bForks).Get(id.Bytes()) != nil; seen {
			return nil
		}
		return tx.Bucket(bForks).Put(id.Bytes(), raw)
	}); err != nil {
		s.log.Warn("accounting: storing a fork proof", "err", err)
		return false
	}
	if seen {
		return false
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, pid := range s.host.Network().Peers() {
		did, err := identity.DIDFromPeerID(pid)
		if err != nil || did == from {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			m, _ := didcomm.NewMessage(exchange.TypeForkProof, ForkProofBody{Proof: raw})
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := s.agent.Request(cctx, did, m); err != nil && !isNoAnswer(err) {
				s.log.Debug("accounting: spreading a fork proof", "peer", did, "err", err)
			}
		}()
	}
	wg.Wait()
	return true
}

// handleForkProof verifies a proof with no trust in the sender, keeps it
// and spreads it on.
func (s *Service) handleForkProof(ctx context.Context, msg *didcomm.Message) (*didcomm.Message, error) {
	var b ForkProofBody
	if err := json.Unmarshal(msg.Body, &b); err != nil {
		return nil, problem(didcomm.CodeMalformed, "fork-proof body: %v", err)
	}
	p, err := receipt.DecodeForkProof(b.Proof)
	if err != nil {
		s.m.forkProofs.WithLabelValues("refused").Inc()
		return nil, problem(exchange.CodeInvalid, "%v", err)
	}
	if s.keepAndSpread(ctx, p, msg.From) {
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
