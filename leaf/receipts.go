package leaf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/receipt"
)

// Accounting defaults (spec/leaf.md "Receipts").
const (
	// DefaultWindowSecs is the accounting window, the node default
	// (`[accounting] window = '1h'`); a leaf's must equal its homes'.
	DefaultWindowSecs = 3600
	// DefaultDisputePeriodSecs is how long after a window's end the leaf
	// still proposes its receipt; then it reports the window disputed.
	// It equals the home's default leaf dispute period
	// (accounting.DefaultLeafDisputePeriod).
	DefaultDisputePeriodSecs = 7 * 24 * 3600
	// disputeRounds bounds the proposals of one window, as a node's
	// `[accounting] dispute_rounds` does by default.
	disputeRounds = 3
	// receiptReserve is the least time left in a wake for the receipt
	// exchange to start: a window takes two round trips, and a wake with
	// less left defers it to the next one rather than run past its
	// deadline.
	receiptReserve = 2 * time.Second
)

var (
	bAcct         = []byte("acct-windows")     // home DID \0 window → acctWindow JSON
	bRcpt         = []byte("receipts")         // pair \0 seq → co-signed receipt
	bRcptHead     = []byte("receipt-heads")    // pair → seq of the latest receipt
	bRcptUnacked  = []byte("receipt-unacked")  // pair → seq countersigned, not yet acknowledged by the home
	bRcptDisputed = []byte("receipt-disputed") // pair \0 window → disputed receipt signed by the leaf
)

// acctBuckets are the accounting buckets of leaf.db.
var acctBuckets = [][]byte{bAcct, bRcpt, bRcptHead, bRcptUnacked, bRcptDisputed}

// acctWindow is the leaf's own figures for one window with one home, and
// the state of that window's exchange.
type acctWindow struct {
	Start  int64         `json:"start"`
	Secs   int64         `json:"secs"`
	Mine   receipt.Side  `json:"mine"`
	Theirs *receipt.Side `json:"theirs,omitempty"`
	Rounds int           `json:"rounds"`
}

func (w acctWindow) end() int64 { return w.Start + w.Secs }

func acctKey(prefix string, v uint64) []byte {
	return append(append([]byte(prefix), 0), u64key(v)...)
}

func pairKey(x, y string) string {
	a, b := receipt.Pair(x, y)
	return a + " " + b
}

// count adds to the leaf's figures with home in the window now falls in,
// inside the transaction that stores what was counted, so a count and
// its cause survive a kill -9 together.
func count(tx *bolt.Tx, home string, secs int64, now time.Time, fn func(*receipt.Side)) error {
	start := now.Unix() - now.Unix()%secs
	k := acctKey(home, uint64(start))
	w := acctWindow{Start: start, Secs: secs}
	if v := tx.Bucket(bAcct).Get(k); v != nil {
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
	}
	fn(&w.Mine)
	return putJSONKey(tx, bAcct, k, w)
}

// countAdd is an addition to the leaf's figures with one home, made in
// the transaction of what it counts.
type countAdd struct {
	home string
	secs int64
	at   time.Time
	fn   func(*receipt.Side)
}

// apply adds c in tx; a nil c adds nothing.
func (c *countAdd) apply(tx *bolt.Tx) error {
	if c == nil {
		return nil
	}
	return count(tx, c.home, c.secs, c.at, c.fn)
}

// addCount adds c in a transaction of its own, for a service with
// nothing else to store (events served from the leaf's cache).
func (d *db) addCount(c *countAdd) error {
	return d.bolt.Update(c.apply)
}

func putJSONKey(tx *bolt.Tx, bucket, k []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucket).Put(k, b)
}

// closedWindows lists the windows with home that ended by before, oldest
// first.
func (d *db) closedWindows(home string, before int64) ([]acctWindow, error) {
	var out []acctWindow
	err := d.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bAcct).Cursor()
		pfx := append([]byte(home), 0)
		for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			var w acctWindow
			if err := json.Unmarshal(v, &w); err != nil {
				return err
			}
			if w.end() <= before {
				out = append(out, w)
			}
		}
		return nil
	})
	return out, err
}

func rcptHead(tx *bolt.Tx, pair string) (*receipt.Receipt, error) {
	v := tx.Bucket(bRcptHead).Get([]byte(pair))
	if v == nil {
		return nil, nil
	}
	raw := tx.Bucket(bRcpt).Get(acctKey(pair, binary.BigEndian.Uint64(v)))
	if raw == nil {
		return nil, fmt.Errorf("leaf: receipt head of %s names a missing receipt", pair)
	}
	return receipt.Decode(raw)
}

func (d *db) receiptHead(pair string) (h *receipt.Receipt, err error) {
	err = d.bolt.View(func(tx *bolt.Tx) error {
		h, err = rcptHead(tx, pair)
		return err
	})
	return h, err
}

// mineFor is the leaf's figures for a window with home: pending, or in
// the disputed record if the leaf gave up on it while the home had signed.
func (d *db) mineFor(home, pair, leafDID string, window int64) (mine receipt.Side, ok bool) {
	d.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bAcct).Get(acctKey(home, uint64(window))); v != nil {
			var w acctWindow
			if json.Unmarshal(v, &w) == nil {
				mine, ok = w.Mine, true
			}
		} else if v := tx.Bucket(bRcptDisputed).Get(acctKey(pair, uint64(window))); v != nil {
			if r, err := receipt.Decode(v); err == nil {
				mine, ok = r.Side(leafDID), true
			}
		}
		return nil
	})
	return mine, ok
}

// storeReceipt stores a co-signed receipt (fsynced) before the leaf sends
// its countersignature: the head advances, the window's figures go, and
// the countersignature is marked unacknowledged. A different receipt
// stored for the same seq is never replaced.
func (d *db) storeReceipt(r *receipt.Receipt, home string) error {
	raw, err := r.Encode()
	if err != nil {
		return err
	}
	pair := r.PairKey()
	return d.bolt.Update(func(tx *bolt.Tx) error {
		k := acctKey(pair, r.Seq)
		if old := tx.Bucket(bRcpt).Get(k); old != nil {
			if bytes.Equal(old, raw) {
				return nil
			}
			return fmt.Errorf("leaf: a different receipt is stored for %s seq %d", pair, r.Seq)
		}
		if err := tx.Bucket(bRcpt).Put(k, raw); err != nil {
			return err
		}
		if err := tx.Bucket(bRcptHead).Put([]byte(pair), u64key(r.Seq)); err != nil {
			return err
		}
		tx.Bucket(bAcct).Delete(acctKey(home, uint64(r.WindowStart)))
		tx.Bucket(bRcptDisputed).Delete(acctKey(pair, uint64(r.WindowStart)))
		return tx.Bucket(bRcptUnacked).Put([]byte(pair), u64key(r.Seq))
	})
}

// unacked is the receipt whose countersignature the home has not
// acknowledged (nil: none).
func (d *db) unacked(pair string) (r *receipt.Receipt, err error) {
	err = d.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bRcptUnacked).Get([]byte(pair))
		if v == nil {
			return nil
		}
		raw := tx.Bucket(bRcpt).Get(acctKey(pair, binary.BigEndian.Uint64(v)))
		if raw == nil {
			return fmt.Errorf("leaf: unacknowledged receipt of %s is missing", pair)
		}
		r, err = receipt.Decode(raw)
		return err
	})
	return r, err
}

func (d *db) acked(pair string, seq uint64) error {
	return d.bolt.Update(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bRcptUnacked).Get([]byte(pair)); v != nil && binary.BigEndian.Uint64(v) == seq {
			return tx.Bucket(bRcptUnacked).Delete([]byte(pair))
		}
		return nil
	})
}

func (d *db) saveWindow(home string, w acctWindow) error {
	return d.bolt.Update(func(tx *bolt.Tx) error {
		k := acctKey(home, uint64(w.Start))
		if tx.Bucket(bAcct).Get(k) == nil {
			return nil // stored as a receipt or disputed meanwhile
		}
		return putJSONKey(tx, bAcct, k, w)
	})
}

// markDisputed ends a window's exchange without agreement: a disputed
// receipt with both sides' figures (the home's as last heard, zero if
// never), signed by the leaf.
func (l *Leaf) markDisputed(home string, w acctWindow) error {
	raw, err := exchange.Disputed(l.key, home, w.Start, w.Secs, w.Mine, w.Theirs)
	if err != nil {
		return err
	}
	return l.db.bolt.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bRcptDisputed).Put(acctKey(pairKey(l.DID(), home), uint64(w.Start)), raw); err != nil {
			return err
		}
		return tx.Bucket(bAcct).Delete(acctKey(home, uint64(w.Start)))
	})
}

// receiptsJSON lists the leaf's co-signed receipts in pair and sequence
// order, then its disputed ones, as a JSON array of receipt.JSON.
func (d *db) receiptsJSON() ([]byte, error) {
	var rs []*receipt.Receipt
	err := d.bolt.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bRcpt, bRcptDisputed} {
			if err := tx.Bucket(b).ForEach(func(_, v []byte) error {
				r, err := receipt.Decode(v)
				if err != nil {
					return err
				}
				rs = append(rs, r)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Disputed != rs[j].Disputed {
			return !rs[i].Disputed
		}
		if rs[i].PairKey() != rs[j].PairKey() {
			return rs[i].PairKey() < rs[j].PairKey()
		}
		if rs[i].Seq != rs[j].Seq {
			return rs[i].Seq < rs[j].Seq
		}
		return rs[i].WindowStart < rs[j].WindowStart
	})
	out := make([]receipt.JSON, 0, len(rs))
	for _, r := range rs {
		j, err := r.ToJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return json.Marshal(out)
}

// receipts runs the receipt exchange with every mediating home, after the
// pickup and catch-up: the closed windows, oldest first, each proposed by
// the leaf (spec/leaf.md "Receipts"). A wake with less than
// receiptReserve left defers it all to the next wake, and a home the
// wake left as unreachable waits for a later one.
func (w *wake) receipts() {
	var wg sync.WaitGroup
	for i := range w.st.Homes {
		h := &w.st.Homes[i]
		if !h.Mediated || w.unreachable(i) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.receiptsWith(h); err != nil {
				w.fail(fmt.Errorf("leaf: receipts with %s: %w", h.DID, err))
			}
		}()
	}
	wg.Wait()
	left := int64(0)
	for _, h := range w.st.Homes {
		ws, _ := w.l.db.closedWindows(h.DID, time.Now().Unix())
		left += int64(len(ws))
	}
	w.add(func(s *Summary) { s.ReceiptsLeft = left })
}

// timeLeft reports whether the wake has receiptReserve left.
func (w *wake) timeLeft() bool {
	dl, ok := w.ctx.Deadline()
	return w.ctx.Err() == nil && (!ok || time.Until(dl) >= receiptReserve)
}

func (w *wake) receiptsWith(h *homeState) error {
	if !w.timeLeft() {
		return nil
	}
	c := &mediation.Client{Packer: w.l.packer, Unpacker: w.l.unpacker, Mediator: h.DID, Exchange: w.exchange(h.Endpoint)}
	pair := pairKey(w.l.DID(), h.DID)
	home := h.DID
	p := &exchange.Proposer{Key: w.l.key, Responder: home, Bounds: exchange.DefaultBounds, Send: c.Request,
		Mine:  func(window int64) (receipt.Side, bool) { return w.l.db.mineFor(home, pair, w.l.DID(), window) },
		Store: func(r *receipt.Receipt) error { return w.l.db.storeReceipt(r, home) }}
	if r, err := w.l.db.unacked(pair); err != nil {
		return err
	} else if r != nil {
		if err := w.sendCountersign(p, r); err != nil {
			return err
		}
	}
	now := time.Now()
	ws, err := w.l.db.closedWindows(h.DID, now.Unix())
	if err != nil {
		return err
	}
	for i, aw := range ws {
		if !w.timeLeft() {
			return nil
		}
		if now.Unix() > aw.end()+w.l.cfg.DisputePeriodSecs || aw.Rounds >= disputeRounds {
			if err := w.l.markDisputed(h.DID, aw); err != nil {
				return err
			}
			continue
		}
		next, err := w.proposeWindow(p, aw)
		if err != nil || !next {
			return err
		}
		w.l.progress.report("receipts", int64(i+1), int64(len(ws)))
	}
	return nil
}

// proposeWindow runs the leaf's side of one window's exchange with a
// home, the proposer's side every node runs too (exchange.Proposer):
// propose, check both sides of the home's signed receipt against the
// leaf's own figures, store the receipt, countersign. It reports whether
// the next window may follow in this wake (not when the home is not ready
// or the window is in dispute: the chain takes windows in order).
func (w *wake) proposeWindow(p *exchange.Proposer, aw acctWindow) (bool, error) {
	h, err := w.l.db.receiptHead(pairKey(w.l.DID(), p.Responder))
	if err != nil {
		return false, err
	}
	out, err := p.Propose(w.ctx, h, exchange.Window{Start: aw.Start, Secs: aw.Secs, Mine: aw.Mine, Rounds: aw.Rounds})
	var pr *didcomm.Problem
	if errors.As(err, &pr) && (pr.Code == exchange.CodeNotReady || pr.Code == didcomm.CodeUnsupportedType) {
		// The home has not saved the window yet, or keeps no accounts
		// (an older node): not an error of the wake; the window waits
		// for a later one, at most the dispute period.
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if out.Receipt != nil {
		w.add(func(s *Summary) { s.Receipts++ })
		return true, w.sendCountersign(p, out.Receipt)
	}
	// In dispute: the home's open, or the leaf refused what it signed.
	aw.Rounds = out.Round
	if out.Dispute.WindowStart == aw.Start {
		aw.Theirs = &out.Dispute.Counts
	}
	if err := w.l.db.saveWindow(p.Responder, aw); err != nil {
		return false, err
	}
	if aw.Rounds < disputeRounds {
		return false, nil // proposed again next wake
	}
	return true, w.l.markDisputed(p.Responder, aw)
}

// sendCountersign sends the leaf's signature of a stored receipt and,
// once the home acknowledges it, clears it.
func (w *wake) sendCountersign(p *exchange.Proposer, r *receipt.Receipt) error {
	if err := p.Countersign(w.ctx, r); err != nil {
		return err
	}
	return w.l.db.acked(r.PairKey(), r.Seq)
}

// Receipts returns the leaf's receipts with its home nodes as a JSON
// array, in the form `fleetmesh receipts --json` prints (receipt.JSON):
// the co-signed ones in pair and sequence order, then the disputed ones.
func (l *Leaf) Receipts() (out []byte, err error) {
	defer protect(&err)
	return l.db.receiptsJSON()
}
