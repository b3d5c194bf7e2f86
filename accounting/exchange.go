package accounting

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
)

func problem(code, format string, args ...any) error {
	return &didcomm.Problem{Code: code, Err: fmt.Errorf(format, args...)}
}

// snapshot stores a closed window's figures as pending, per peer, in one
// committed transaction. It seals the window first: no late count
// (meter.RecordAt) lands in it after its figures are read.
func (s *Service) snapshot(w *meter.Window) error {
	s.meter.Seal(w)
	sides := w.Sides()
	err := s.db.b.Update(func(tx *bolt.Tx) error {
		for p, side := range sides {
			did, err := identity.DIDFromPeerID(p)
			if err != nil {
				continue
			}
			ev := w.Evidence(p)
			// Figures saved at a stop within this window (Close), or a
			// refusal (Refuse), are kept: the figures add up
			// (spec/disputes.md "Stops").
			rec, _, err := pendingAt(tx, did, w.Start, s.meter.Length())
			if err != nil {
				return err
			}
			rec.Mine = rec.Mine.Add(side)
			if rec.Evidence != nil {
				ev = rec.Evidence.Merge(ev)
			}
			rec.Evidence = &ev
			if err := putJSON(tx, bPending, key(did, uint64(w.Start)), rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.m.windows.Inc()
		s.log.Debug("accounting: window saved", "window", w.Start, "peers", len(sides))
	}
	return err
}

// exchange runs the due exchanges with every peer that has pending
// windows or an unacknowledged countersignature, a few peers at once.
func (s *Service) exchange(ctx context.Context, now time.Time) {
	peers := map[string]bool{}
	s.db.b.View(func(tx *bolt.Tx) error {
		tx.Bucket(bPending).ForEach(func(k, _ []byte) error {
			peers[string(k[:bytes.IndexByte(k, 0)])] = true
			return nil
		})
		tx.Bucket(bUnacked).ForEach(func(k, _ []byte) error {
			a, b := splitPair(string(k))
			peers[map[bool]string{true: b, false: a}[a == s.did]] = true
			return nil
		})
		return nil
	})
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for p := range peers {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.exchangeWith(ctx, p, now)
		}()
	}
	wg.Wait()
}

func splitPair(pair string) (string, string) {
	a, b, _ := bytes.Cut([]byte(pair), []byte(" "))
	return string(a), string(b)
}

func (s *Service) exchangeWith(ctx context.Context, peer string, now time.Time) {
	a, b := receipt.Pair(s.did, peer)
	pair := a + " " + b
	leaf := s.leaf(peer)
	if !leaf {
		s.resendCountersign(ctx, pair, peer)
	}
	var ps []pending
	s.db.b.View(func(tx *bolt.Tx) error {
		var err error
		ps, err = pendingFor(tx, peer)
		return err
	})
	for _, p := range ps {
		if p.end() > s.readyBefore.Load() {
			// Part of a window saved at a stop, the node restarted
			// before the window's end: not closed here yet.
			return
		}
		deadline := time.Unix(p.end(), 0).Add(s.cfg.DisputePeriod.Duration)
		if leaf {
			deadline = time.Unix(p.end(), 0).Add(s.cfg.LeafDisputePeriod)
		}
		if now.After(deadline) || p.Rounds >= s.cfg.DisputeRounds {
			if s.signedFor(pair, p.Start) {
				continue // b signed it: wait for a's countersignature
			}
			if err := s.markDisputed(pair, peer, p); err != nil {
				s.log.Warn("accounting: marking a window disputed", "peer", peer, "window", p.Start, "err", err)
			}
			continue
		}
		if leaf {
			// A leaf proposes when it wakes (spec/leaf.md): a home
			// cannot reach it, so it only waits, oldest window first.
			continue
		}
		if p.Refused != "" {
			// Never signed here: the window waits for its dispute
			// period's end, then is reported disputed (Refuse).
			return
		}
		if s.did != a {
			// b: ask a to propose once half the dispute period has gone by.
			if now.After(time.Unix(p.end(), 0).Add(s.cfg.DisputePeriod.Duration / 2)) {
				s.request(ctx, peer, p.Start)
			}
			return
		}
		if err := s.propose(ctx, pair, peer, p); err != nil {
			s.log.Info("accounting: proposing a receipt", "peer", peer, "window", p.Start, "err", err)
		}
		return // one window at a time per pair, oldest first
	}
}

func (s *Service) request(ctx context.Context, peer string, window int64) {
	m, _ := didcomm.NewMessage(exchange.TypeRequest, exchange.RequestBody{WindowStart: window})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.agent.Request(ctx, peer, m); err != nil && !errors.Is(err, agent.ErrNoAnswer) {
		s.log.Debug("accounting: asking for a proposal", "peer", peer, "err", err)
	}
}

// propose runs a's side of one window's exchange, the proposer's side a
// leaf runs too (exchange.Proposer): propose, check both sides of b's
// signed receipt against a's own figures, store it and countersign; or
// record the dispute round.
func (s *Service) propose(ctx context.Context, pair, peer string, p pending) error {
	var h *receipt.Receipt
	if err := s.db.b.View(func(tx *bolt.Tx) error {
		var err error
		h, err = head(tx, pair)
		return err
	}); err != nil {
		return err
	}
	out, err := s.proposerWith(pair, peer).Propose(ctx, h, exchange.Window{Start: p.Start, Secs: p.Secs, Mine: p.Mine, Rounds: p.Rounds, Evidence: p.Evidence})
	if err != nil {
		var pr *didcomm.Problem
		if errors.As(err, &pr) && pr.Code == didcomm.CodeUnsupportedType {
			// A peer without accounting (a leaf, an older node): the
			// window can never be signed; report it disputed now.
			return s.markDisputed(pair, peer, p)
		}
		return err
	}
	if out.Receipt != nil {
		s.m.receipts.WithLabelValues("signed", "").Inc()
		return s.sendCountersign(ctx, out.Receipt, peer)
	}
	d := out.Dispute
	s.m.disputes.WithLabelValues("opened").Inc()
	p.Rounds = out.Round
	if d.WindowStart == p.Start {
		p.Theirs = &d.Counts
	}
	p.theirs(d.Evidence)
	s.log.Info("accounting: dispute", "peer", peer, "window", p.Start, "round", out.Round, "reason", d.Reason,
		"signature_refused", out.Refused, "peer_findings", d.Findings, "findings", p.Findings)
	return s.db.b.Update(func(tx *bolt.Tx) error {
		k := key(peer, uint64(p.Start))
		if tx.Bucket(bPending).Get(k) == nil {
			return nil
		}
		return putJSON(tx, bPending, k, p)
	})
}

// bounds are this node's bounds on a peer's figures.
func (s *Service) bounds() exchange.Bounds {
	return exchange.Bounds{Tolerance: s.cfg.Tolerance, Slack: s.cfg.Slack}
}

// send is exchange.Send to peer over the node's agent, each message
// bounded by its own timeout.
func (s *Service) send(peer string) exchange.Send {
	return func(ctx context.Context, typ string, body any) (*didcomm.Message, error) {
		m, err := didcomm.NewMessage(typ, body)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return s.agent.Request(ctx, peer, m)
	}
}

// proposerWith is this node's proposer of the pair with peer: its figures
// are the window's pending ones, or those in its disputed record when a
// gave up on a window b had signed (b's signature still stands), and a
// complete receipt is stored (fsynced) before the countersignature goes.
func (s *Service) proposerWith(pair, peer string) *exchange.Proposer {
	return &exchange.Proposer{Key: s.key, Responder: peer, Bounds: s.bounds(), Send: s.send(peer),
		Mine: func(window int64) (mine receipt.Side, ok bool) {
			s.db.b.View(func(tx *bolt.Tx) error {
				if v := tx.Bucket(bPending).Get(key(peer, uint64(window))); v != nil {
					var p pending
					if json.Unmarshal(v, &p) == nil {
						mine, ok = p.Mine, true
					}
				} else if v := tx.Bucket(bDisputed).Get(key(pair, uint64(window))); v != nil {
					if d, err := receipt.Decode(v); err == nil {
						mine, ok = d.Side(s.did), true
					}
				}
				return nil
			})
			return mine, ok
		},
		Store: func(r *receipt.Receipt) error {
			return s.db.b.Update(func(tx *bolt.Tx) error { return s.storeOwn(tx, r, peer) })
		}}
}

// storeOwn stores a complete receipt of one of this node's pairs and
// advances the pair's head; the window's pending figures and the
// responder's signed record go, and the proposer marks the
// countersignature unacknowledged.
func (s *Service) storeOwn(tx *bolt.Tx, r *receipt.Receipt, peer string) error {
	if old, err := putReceipt(tx, r); err != nil {
		if errors.Is(err, errFork) {
			go s.forkFound(old, r)
		}
		return err
	}
	pair := r.PairKey()
	if err := tx.Bucket(bHeads).Put([]byte(pair), u64(r.Seq)); err != nil {
		return err
	}
	if err := indexOwn(tx, r); err != nil {
		return err
	}
	tx.Bucket(bPending).Delete(key(peer, uint64(r.WindowStart)))
	tx.Bucket(bSigned).Delete(key(pair, r.Seq))
	tx.Bucket(bDisputed).Delete(key(pair, uint64(r.WindowStart)))
	tx.Bucket(bByWindow).Delete(windowKey(r.WindowStart, 'd', pair))
	tx.Bucket(bToReport).Put(u64(uint64(r.WindowStart)), nil)
	if s.proposer(peer) == s.did {
		return tx.Bucket(bUnacked).Put([]byte(pair), u64(r.Seq))
	}
	return nil
}

// sendCountersign sends a's signature of a stored receipt
// (exchange.Proposer.Countersign) and, once b acknowledges it, clears the
// mark.
func (s *Service) sendCountersign(ctx context.Context, r *receipt.Receipt, peer string) error {
	if err := (&exchange.Proposer{Send: s.send(peer)}).Countersign(ctx, r); err != nil {
		return err
	}
	return s.db.b.Update(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bUnacked).Get([]byte(r.PairKey())); v != nil && binary.BigEndian.Uint64(v) == r.Seq {
			return tx.Bucket(bUnacked).Delete([]byte(r.PairKey()))
		}
		return nil
	})
}

func (s *Service) resendCountersign(ctx context.Context, pair, peer string) {
	var r *receipt.Receipt
	s.db.b.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bUnacked).Get([]byte(pair)); v != nil {
			if raw := tx.Bucket(bReceipts).Get(key(pair, binary.BigEndian.Uint64(v))); raw != nil {
				r, _ = receipt.Decode(raw)
			}
		}
		return nil
	})
	if r != nil {
		if err := s.sendCountersign(ctx, r, peer); err != nil {
			s.log.Debug("accounting: countersignature", "peer", peer, "err", err)
		}
	}
}

func (s *Service) signedFor(pair string, window int64) bool {
	found := false
	s.db.b.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bSigned).Cursor()
		pfx := append([]byte(pair), 0)
		for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			if r, err := receipt.Decode(v); err == nil && r.WindowStart == window {
				found = true
			}
		}
		return nil
	})
	return found
}

// Refuse marks the open window with peer as one this node will never
// sign, whatever the figures, because it caught the peer cheating in it:
// a compute executor's wrong result (spec/compute.md "Accounting"). The
// window's figures are still counted and saved at its close; at the end
// of its dispute period it is reported disputed with finding, even if the
// peer claims nothing for it and never proposes or asks (spec/disputes.md
// "Refused windows"). A proposal for it is answered with a dispute.
func (s *Service) Refuse(peer string, finding string) error {
	if peer == s.did || s.leaf(peer) {
		return fmt.Errorf("accounting: refuse a window with %s: only a node's window with another non-leaf node", peer)
	}
	start := s.meter.Current().Start
	pair, _ := pairOf(s.did, peer)
	err := s.db.b.Update(func(tx *bolt.Tx) error {
		p, stored, err := pendingAt(tx, peer, start, s.meter.Length())
		if err != nil {
			return err
		}
		if !stored && (receiptFor(tx, pair, start) || tx.Bucket(bDisputed).Get(key(pair, uint64(start))) != nil) {
			return fmt.Errorf("accounting: window %d with %s is settled already", start, peer)
		}
		if p.Refused != "" {
			return nil // the first finding stands
		}
		p.Refused = finding
		return putJSON(tx, bPending, key(peer, uint64(start)), p)
	})
	if err == nil {
		s.log.Info("accounting: window refused", "peer", peer, "window", start, "finding", finding)
	}
	return err
}

// markDisputed ends a window's exchange without agreement: a disputed
// receipt with both sides' figures (the peer's as last heard, zero if
// never), signed by this node, reported with the window.
func (s *Service) markDisputed(pair, peer string, p pending) error {
	err := s.db.b.Update(func(tx *bolt.Tx) error { return s.putDisputed(tx, pair, peer, p) })
	if err == nil {
		s.m.disputes.WithLabelValues("disputed").Inc()
		s.log.Info("accounting: window disputed", "peer", peer, "window", p.Start)
	}
	return err
}

// putDisputed stores a window's disputed receipt and record, to be
// reported, in place of its pending figures.
func (s *Service) putDisputed(tx *bolt.Tx, pair, peer string, p pending) error {
	raw, err := exchange.Disputed(s.key, peer, p.Start, p.Secs, p.Mine, p.Theirs)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bDisputed).Put(key(pair, uint64(p.Start)), raw); err != nil {
		return err
	}
	if err := tx.Bucket(bByWindow).Put(windowKey(p.Start, 'd', pair), nil); err != nil {
		return err
	}
	rec := Dispute{Pair: pair, Peer: peer, WindowStart: p.Start, Rounds: p.Rounds, Evidence: p.Evidence, TheirEvidence: p.TheirEvidence, Findings: []string{}}
	if p.Refused != "" {
		rec.Findings = append(rec.Findings, "refused: "+p.Refused)
	}
	rec.Findings = append(rec.Findings, p.Findings...)
	if err := putJSON(tx, bDisputes, key(pair, uint64(p.Start)), rec); err != nil {
		return err
	}
	if err := tx.Bucket(bToReport).Put(u64(uint64(p.Start)), nil); err != nil {
		return err
	}
	return tx.Bucket(bPending).Delete(key(peer, uint64(p.Start)))
}

// handleReceipt serves receipt/1.0.
func (s *Service) handleReceipt(ctx context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
	msg := u.Message
	if !u.Authenticated {
		return nil, problem(didcomm.CodeUnauthorized, "receipt messages must be authcrypted by a node")
	}
	switch msg.Type {
	case exchange.TypePropose:
		return s.handlePropose(msg)
	case exchange.TypeCountersign:
		return s.handleCountersign(msg)
	case exchange.TypeRequest:
		return s.handleRequest(msg)
	case exchange.TypeForkProof:
		return s.handleForkProof(msg)
	case exchange.TypeAck:
		return nil, nil
	}
	return nil, problem(didcomm.CodeUnsupportedType, "receipt/1.0 has no message %s", msg.Type)
}

// handlePropose is b's side: catch up from a's head, check the chain
// position, compare the figures, and either sign (storing what it signed
// first) or open a dispute.
func (s *Service) handlePropose(msg *didcomm.Message) (*didcomm.Message, error) {
	var body exchange.ProposeBody
	if err := json.Unmarshal(msg.Body, &body); err != nil {
		return nil, problem(didcomm.CodeMalformed, "propose body: %v", err)
	}
	a, b := receipt.Pair(s.did, msg.From)
	if msg.From == s.did || s.proposer(msg.From) != msg.From {
		return nil, problem(exchange.CodeInvalid, "the receipt of %s and %s is proposed by %s, whose DID sorts first (or by the leaf of a leaf pair)", a, b, a)
	}
	if body.WindowStart < 0 || body.WindowStart%s.meter.Length() != 0 {
		return nil, problem(exchange.CodeInvalid, "window_start %d is not a UTC-aligned window start", body.WindowStart)
	}
	if body.WindowSecs != s.meter.Length() {
		return nil, problem(exchange.CodeInvalid, "window of %ds; this node's windows are %ds", body.WindowSecs, s.meter.Length())
	}
	if body.WindowStart+body.WindowSecs > s.readyBefore.Load() {
		return nil, problem(exchange.CodeNotReady, "window %d has not closed here yet", body.WindowStart)
	}
	pair := a + " " + b
	defer s.lockPair(pair)()
	var out *didcomm.Message
	err := s.db.b.Update(func(tx *bolt.Tx) error {
		h, err := head(tx, pair)
		if err != nil {
			return err
		}
		if len(body.Head) > 0 {
			if h, err = s.catchUp(tx, h, body.Head, msg.From); err != nil {
				return err
			}
		}
		if !exchange.SamePosition(body, h) {
			wantSeq, _ := exchange.Next(h)
			return problem(exchange.CodeChain, "proposed seq %d; this node's chain of the pair is at seq %d", body.Seq, wantSeq-1)
		}
		// What b signed at this seq before is what it signs again: never
		// two different receipts for one seq.
		if raw := get(tx, bSigned, key(pair, body.Seq)); raw != nil {
			out, err = didcomm.NewMessage(exchange.TypeSign, exchange.ReceiptBody{Receipt: raw})
			return err
		}
		if err := s.windowAllowed(tx, msg.From, pair, body.WindowStart); err != nil {
			return err
		}
		k := key(msg.From, uint64(body.WindowStart))
		p, _, err := pendingAt(tx, msg.From, body.WindowStart, body.WindowSecs)
		if err != nil {
			return err
		}
		mine := p.Mine
		if h != nil && body.WindowStart <= h.WindowStart {
			return problem(exchange.CodeChain, "window %d is not after the pair's last receipt (window %d)", body.WindowStart, h.WindowStart)
		}
		why := exchange.CheckProposal(body, mine, s.bounds())
		if p.Refused != "" {
			why = "this node refuses the window: " + p.Refused
		}
		if why != "" {
			p.Theirs, p.Rounds = &body.Counts, body.Round
			p.theirs(body.Evidence)
			if err := putJSON(tx, bPending, k, p); err != nil {
				return err
			}
			s.m.disputes.WithLabelValues("opened").Inc()
			out, err = didcomm.NewMessage(exchange.TypeDisputeOpen, exchange.DisputeBody{WindowStart: body.WindowStart, Counts: mine, Round: body.Round, Reason: why,
				Evidence: p.Evidence, Findings: p.Findings})
			return err
		}
		r := exchange.Build(msg.From, s.did, body, mine)
		if err := r.Sign(s.key); err != nil {
			return err
		}
		raw, err := r.Encode()
		if err != nil {
			return err
		}
		if err := tx.Bucket(bSigned).Put(key(pair, body.Seq), raw); err != nil {
			return err
		}
		out, err = didcomm.NewMessage(exchange.TypeSign, exchange.ReceiptBody{Receipt: raw})
		return err
	})
	if err != nil {
		return nil, err
	}
	out.Thid = msg.ID
	return out, nil
}

// catchUp stores a's head receipt when b lacks it (b signed it, a stored
// it, the countersignature never arrived). A head at a seq b already holds
// must be the receipt b holds there: another one, co-signed, is a fork,
// whose proof is built and spread, and the proposal is refused.
func (s *Service) catchUp(tx *bolt.Tx, h *receipt.Receipt, raw []byte, from string) (*receipt.Receipt, error) {
	r, err := receipt.Decode(raw)
	if err != nil {
		return h, problem(exchange.CodeInvalid, "head: %v", err)
	}
	if err := r.Verify(); err != nil {
		return h, problem(exchange.CodeInvalid, "head: %v", err)
	}
	if pair, _ := pairOf(s.did, from); r.PairKey() != pair {
		return h, problem(exchange.CodeInvalid, "head is of another pair")
	}
	if h != nil && r.Seq <= h.Seq {
		if old, err := putReceipt(tx, r); errors.Is(err, errFork) {
			go s.forkFound(old, r)
			return h, problem(exchange.CodeChain, "head seq %d differs from the receipt this node holds at that seq: fork proof built", r.Seq)
		} else if err != nil {
			return h, err
		}
		return h, nil
	}
	wantSeq := uint64(1)
	if h != nil {
		wantSeq = h.Seq + 1
	}
	if r.Seq != wantSeq {
		return h, problem(exchange.CodeChain, "head is seq %d, this node holds the pair to seq %d", r.Seq, wantSeq-1)
	}
	if err := s.storeOwn(tx, r, from); err != nil {
		return h, err
	}
	s.m.receipts.WithLabelValues("signed", "").Inc()
	return r, nil
}

// handleCountersign is b's side of the end: store the complete receipt.
func (s *Service) handleCountersign(msg *didcomm.Message) (*didcomm.Message, error) {
	var rb exchange.ReceiptBody
	if err := json.Unmarshal(msg.Body, &rb); err != nil {
		return nil, problem(didcomm.CodeMalformed, "countersign body: %v", err)
	}
	r, err := receipt.Decode(rb.Receipt)
	if err == nil {
		err = r.Verify()
	}
	if err != nil {
		s.m.receipts.WithLabelValues("refused", "invalid").Inc()
		return nil, problem(exchange.CodeInvalid, "%v", err)
	}
	if !r.Has(msg.From) || !r.Has(s.did) || msg.From == s.did || s.proposer(msg.From) != msg.From {
		return nil, problem(exchange.CodeInvalid, "receipt of %s is not one of this pair, countersigned by its proposer", r.PairKey())
	}
	pair := r.PairKey()
	defer s.lockPair(pair)()
	err = s.db.b.Update(func(tx *bolt.Tx) error {
		h, err := head(tx, pair)
		if err != nil {
			return err
		}
		if h != nil && r.Seq <= h.Seq {
			if old := get(tx, bReceipts, key(pair, r.Seq)); old != nil {
				if _, err := putReceipt(tx, r); errors.Is(err, errFork) {
					o, _ := receipt.Decode(old)
					go s.forkFound(o, r)
					return problem(exchange.CodeChain, "a different receipt is stored for seq %d: fork proof built", r.Seq)
				}
			}
			return nil // already stored
		}
		_, err = s.catchUp(tx, h, rb.Receipt, msg.From)
		return err
	})
	if err != nil {
		return nil, err
	}
	out, _ := didcomm.NewMessage(exchange.TypeAck, nil)
	out.Thid = msg.ID
	return out, nil
}

// handleRequest is a's side of b's request to propose: a window a has no
// figures for is proposed with zero figures, as a measured it. A window
// the pair's chain has already passed (a lost its figures, say in a crash
// at the window's close, and signed later windows since) can no longer be
// receipted: a reports it disputed at once, as b will, so that neither
// side drops it.
func (s *Service) handleRequest(msg *didcomm.Message) (*didcomm.Message, error) {
	var body exchange.RequestBody
	if err := json.Unmarshal(msg.Body, &body); err != nil {
		return nil, problem(didcomm.CodeMalformed, "request body: %v", err)
	}
	a, _ := receipt.Pair(s.did, msg.From)
	if a != s.did {
		return nil, problem(exchange.CodeInvalid, "this node does not propose for the pair")
	}
	if body.WindowStart%s.meter.Length() != 0 || body.WindowStart+s.meter.Length() > s.readyBefore.Load() {
		return nil, problem(exchange.CodeNotReady, "window %d is not a closed window here", body.WindowStart)
	}
	pair, _ := pairOf(s.did, msg.From)
	passed := false
	err := s.db.b.Update(func(tx *bolt.Tx) error {
		k := key(msg.From, uint64(body.WindowStart))
		if tx.Bucket(bPending).Get(k) != nil || tx.Bucket(bDisputed).Get(key(pair, uint64(body.WindowStart))) != nil {
			return nil
		}
		p := pending{Start: body.WindowStart, Secs: s.meter.Length()}
		h, err := head(tx, pair)
		if err != nil {
			return err
		}
		if h != nil && h.WindowStart >= body.WindowStart {
			if receiptFor(tx, pair, body.WindowStart) {
				return nil
			}
			// The chain passed a window b holds figures for: this node
			// lost its own (spec/disputes.md), so the first contact it
			// knows may be later; the dispute period still bounds it.
			if err := s.inPeriod(msg.From, body.WindowStart); err != nil {
				return err
			}
			p.Findings = []string{"this node holds no figures for the window (lost before they were saved), and the pair's chain has passed it"}
			passed = true
			return s.putDisputed(tx, pair, msg.From, p)
		}
		if err := s.windowAllowed(tx, msg.From, pair, body.WindowStart); err != nil {
			return err
		}
		return putJSON(tx, bPending, k, p)
	})
	if err == nil && passed {
		s.m.disputes.WithLabelValues("disputed").Inc()
		s.log.Info("accounting: window disputed", "peer", msg.From, "window", body.WindowStart, "why", "no figures here, and the chain has passed it")
	}
	return nil, err
}

func pairOf(x, y string) (string, error) {
	a, b := receipt.Pair(x, y)
	return a + " " + b, nil
}
