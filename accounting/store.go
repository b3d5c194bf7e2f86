package accounting

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/receipt"
)

// DBFile is the accounting database's name in the accounting directory.
const DBFile = "accounting.db"

var (
	bReceipts = []byte("receipts") // pair \0 seq → co-signed receipt (any pair)
	bHeads    = []byte("heads")    // pair → seq of the latest own receipt
	bPending  = []byte("pending")  // peer DID \0 window → pending window (JSON)
	bSigned   = []byte("signed")   // pair \0 seq → receipt this node signed as b, not yet complete
	bDisputed = []byte("disputed") // pair \0 window → disputed receipt
	bToReport = []byte("toreport") // window → ""
	bReports  = []byte("reports")  // node \0 window page(4) → report page (node \0 window: a one-page report stored before pages)
	bForks    = []byte("forks")    // proof CID → fork proof
	bForkers  = []byte("forkers")  // forker DID → CID of the one proof kept of it
	bGrants   = []byte("grants")   // id → grant record (JSON)
	bUnacked  = []byte("unacked")  // pair → seq whose countersignature b has not acknowledged
	bDisputes = []byte("disputes") // pair \0 window → dispute record (JSON)
	bContacts = []byte("contacts") // peer DID → window (8 bytes) of its first connection, kept a dispute period
	// Indexes, so that listing and publishing read only what they
	// return: built from the buckets above when first opened.
	bByNode   = []byte("receipts-by-node") // node \0 pair \0 seq → "" for every co-signed receipt held
	bByWindow = []byte("own-by-window")    // window 'r' pair → seq of an own co-signed receipt; window 'd' pair → "" for an own disputed one
)

type db struct{ b *bolt.DB }

func openDB(dir string) (*db, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("accounting: %w", err)
	}
	b, err := bolt.Open(filepath.Join(dir, DBFile), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("accounting: open %s: %w (is another node running on this home?)", dir, err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		for _, n := range [][]byte{bReceipts, bHeads, bPending, bSigned, bDisputed, bToReport, bReports, bForks, bForkers, bGrants, bUnacked, bDisputes, bContacts} {
			if _, err := tx.CreateBucketIfNotExists(n); err != nil {
				return err
			}
		}
		return buildIndexes(tx)
	})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("accounting: %w", err)
	}
	return &db{b}, nil
}

func (d *db) close() error { return d.b.Close() }

// buildIndexes creates the index buckets, filling them from the records
// when they are new (a database written before them).
func buildIndexes(tx *bolt.Tx) error {
	if tx.Bucket(bByNode) != nil && tx.Bucket(bByWindow) != nil {
		return nil
	}
	tx.DeleteBucket(bByNode)
	tx.DeleteBucket(bByWindow)
	if _, err := tx.CreateBucket(bByNode); err != nil {
		return err
	}
	if _, err := tx.CreateBucket(bByWindow); err != nil {
		return err
	}
	heads := tx.Bucket(bHeads)
	err := tx.Bucket(bReceipts).ForEach(func(k, v []byte) error {
		pair := string(k[:bytes.IndexByte(k, 0)])
		if err := indexReceipt(tx, pair, binary.BigEndian.Uint64(k[len(pair)+1:])); err != nil {
			return err
		}
		if heads.Get([]byte(pair)) == nil {
			return nil
		}
		r, err := receipt.Decode(v)
		if err != nil {
			return err
		}
		return indexOwn(tx, r)
	})
	if err != nil {
		return err
	}
	return tx.Bucket(bDisputed).ForEach(func(k, _ []byte) error {
		pair := string(k[:bytes.IndexByte(k, 0)])
		return tx.Bucket(bByWindow).Put(windowKey(int64(binary.BigEndian.Uint64(k[len(pair)+1:])), 'd', pair), nil)
	})
}

// indexReceipt indexes a stored co-signed receipt under both its nodes.
func indexReceipt(tx *bolt.Tx, pair string, seq uint64) error {
	a, b := splitPair(pair)
	for _, n := range []string{a, b} {
		if err := tx.Bucket(bByNode).Put(append(append([]byte(n), 0), key(pair, seq)...), nil); err != nil {
			return err
		}
	}
	return nil
}

// indexOwn indexes one of the node's own co-signed receipts by window.
func indexOwn(tx *bolt.Tx, r *receipt.Receipt) error {
	return tx.Bucket(bByWindow).Put(windowKey(r.WindowStart, 'r', r.PairKey()), u64(r.Seq))
}

// windowKey is a bByWindow key: window, kind ('r' co-signed, 'd'
// disputed), pair.
func windowKey(w int64, kind byte, pair string) []byte {
	return append(append(u64(uint64(w)), kind), pair...)
}

// reportKey is a bReports key: node \0 window page.
func reportKey(node string, w int64, page uint32) []byte {
	return binary.BigEndian.AppendUint32(key(node, uint64(w)), page)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func key(prefix string, v uint64) []byte { return append(append([]byte(prefix), 0), u64(v)...) }

// pending is a closed window's figures waiting for the exchange with one
// peer.
type pending struct {
	Start  int64         `json:"start"`
	Secs   int64         `json:"secs"`
	Mine   receipt.Side  `json:"mine"`
	Theirs *receipt.Side `json:"theirs,omitempty"`
	Rounds int           `json:"rounds"`
	// Evidence is this node's evidence of its event figures, saved with
	// them; TheirEvidence the peer's, once a dispute sent it, and
	// Findings what checking one against the other found.
	Evidence      *receipt.Evidence `json:"evidence,omitempty"`
	TheirEvidence *receipt.Evidence `json:"their_evidence,omitempty"`
	Findings      []string          `json:"findings,omitempty"`
	// Refused is why this node will not sign the window whatever the
	// figures (Refuse): it caught the peer cheating in it.
	Refused string `json:"refused,omitempty"`
}

// Dispute is a disputed window's record, kept beside its disputed
// receipt: both sides' evidence and what checking them found
// (spec/disputes.md "Evidence").
type Dispute struct {
	Pair          string            `json:"pair"`
	Peer          string            `json:"peer"`
	WindowStart   int64             `json:"window_start"`
	Rounds        int               `json:"rounds"`
	Evidence      *receipt.Evidence `json:"evidence,omitempty"`
	TheirEvidence *receipt.Evidence `json:"their_evidence,omitempty"`
	Findings      []string          `json:"findings"`
}

// theirs records the peer's evidence, if it sent any, and checks it
// against this node's.
func (p *pending) theirs(e *receipt.Evidence) {
	if e == nil {
		return
	}
	if err := e.Check(); err != nil {
		p.Findings = []string{"the peer's evidence is refused: " + err.Error()}
		return
	}
	p.TheirEvidence = e
	if p.Evidence != nil {
		p.Findings = exchange.CheckEvidence(*p.Evidence, *e)
	}
}

func (p pending) end() int64 { return p.Start + p.Secs }

func get(tx *bolt.Tx, bucket, k []byte) []byte {
	v := tx.Bucket(bucket).Get(k)
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func putJSON(tx *bolt.Tx, bucket, k []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucket).Put(k, b)
}

// head returns the latest own receipt of a pair (nil: none yet).
func head(tx *bolt.Tx, pair string) (*receipt.Receipt, error) {
	v := tx.Bucket(bHeads).Get([]byte(pair))
	if v == nil {
		return nil, nil
	}
	raw := tx.Bucket(bReceipts).Get(key(pair, binary.BigEndian.Uint64(v)))
	if raw == nil {
		return nil, fmt.Errorf("accounting: head of %s names a missing receipt", pair)
	}
	return receipt.Decode(raw)
}

// pendingAt is the pending record of peer's window at start, and whether
// one is stored; without one, a record of that window with no figures.
func pendingAt(tx *bolt.Tx, peer string, start, secs int64) (pending, bool, error) {
	p := pending{Start: start, Secs: secs}
	v := tx.Bucket(bPending).Get(key(peer, uint64(start)))
	if v == nil {
		return p, false, nil
	}
	return p, true, json.Unmarshal(v, &p)
}

// pendingFor lists a peer's pending windows, oldest first.
func pendingFor(tx *bolt.Tx, peer string) ([]pending, error) {
	var out []pending
	c := tx.Bucket(bPending).Cursor()
	pfx := append([]byte(peer), 0)
	for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
		var p pending
		if err := json.Unmarshal(v, &p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

var errFork = errors.New("fork")

// putReceipt stores a verified co-signed receipt. If a different one is
// stored for the same pair and seq it stores nothing and returns the
// stored one with errFork.
func putReceipt(tx *bolt.Tx, r *receipt.Receipt) (*receipt.Receipt, error) {
	raw, err := r.Encode()
	if err != nil {
		return nil, err
	}
	k := key(r.PairKey(), r.Seq)
	if old := tx.Bucket(bReceipts).Get(k); old != nil {
		if bytes.Equal(old, raw) {
			return nil, nil
		}
		o, err := receipt.Decode(old)
		if err != nil {
			return nil, err
		}
		oc, _ := o.CID()
		nc, _ := r.CID()
		if oc.Equals(nc) {
			return nil, nil // the same receipt (signatures are deterministic)
		}
		return o, errFork
	}
	if err := tx.Bucket(bReceipts).Put(k, raw); err != nil {
		return nil, err
	}
	return nil, indexReceipt(tx, r.PairKey(), r.Seq)
}

// receiptFor reports whether the pair holds a co-signed receipt of the
// window.
func receiptFor(tx *bolt.Tx, pair string, window int64) bool {
	c := tx.Bucket(bReceipts).Cursor()
	pfx := append([]byte(pair), 0)
	for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
		if r, err := receipt.Decode(v); err == nil && r.WindowStart == window {
			return true
		}
	}
	return false
}

// receiptsOf lists every stored co-signed receipt involving did, from the
// index.
func (d *db) receiptsOf(did string) ([]*receipt.Receipt, error) {
	var out []*receipt.Receipt
	err := d.b.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bByNode).Cursor()
		pfx := append([]byte(did), 0)
		for k, _ := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = c.Next() {
			v := tx.Bucket(bReceipts).Get(k[len(pfx):])
			if v == nil {
				return fmt.Errorf("accounting: the index names a missing receipt %q", k[len(pfx):])
			}
			r, err := receipt.Decode(v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}
