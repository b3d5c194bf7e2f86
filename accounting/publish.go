package accounting

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
)

// report/1.0: ask a node for another node's receipts and reports.
const (
	PIURIReport     = "https://fleetmesh.org/protocols/report/1.0"
	TypeQuery       = PIURIReport + "/query"
	TypeQueryAnswer = PIURIReport + "/receipts"
)

// maxAnswerReceipts bounds one answer (each receipt is well under 1 KiB,
// base64 in JSON, under the 1 MiB DIDComm message bound).
const maxAnswerReceipts = 600

// QueryBody asks for node's receipts with seq above After in every pair.
type QueryBody struct {
	Node string `json:"node"`
}

// AnswerBody answers a query.
type AnswerBody struct {
	Receipts [][]byte `json:"receipts"`
	Reports  [][]byte `json:"reports"`
}

func isNoAnswer(err error) bool { return errors.Is(err, agent.ErrNoAnswer) }

// publishDue signs the reports of windows whose dispute period is over.
func (s *Service) publishDue(now time.Time) error {
	var due []int64
	s.db.b.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bToReport).ForEach(func(k, _ []byte) error {
			w := int64(binary.BigEndian.Uint64(k))
			if now.After(time.Unix(w+s.meter.Length(), 0).Add(s.cfg.DisputePeriod.Duration)) {
				due = append(due, w)
			}
			return nil
		})
	})
	for _, w := range due {
		if err := s.publish(w); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) publish(w int64) error {
	rep := &receipt.Report{V: receipt.Version, Node: s.did, WindowStart: w, WindowSecs: s.meter.Length(), Receipts: [][]byte{}, Disputed: [][]byte{}}
	return s.db.b.Update(func(tx *bolt.Tx) error {
		tx.Bucket(bReceipts).ForEach(func(k, v []byte) error {
			if pairHas(string(k[:bytes.IndexByte(k, 0)]), s.did) {
				if r, err := receipt.Decode(v); err == nil && r.WindowStart == w {
					rep.Receipts = append(rep.Receipts, append([]byte(nil), v...))
				}
			}
			return nil
		})
		tx.Bucket(bDisputed).ForEach(func(k, v []byte) error {
			if binary.BigEndian.Uint64(k[len(k)-8:]) == uint64(w) {
				rep.Disputed = append(rep.Disputed, append([]byte(nil), v...))
			}
			return nil
		})
		if err := rep.Sign(s.key); err != nil {
			return err
		}
		raw, err := rep.Encode()
		if err != nil {
			return err
		}
		if err := tx.Bucket(bReports).Put(key(s.did, uint64(w)), raw); err != nil {
			return err
		}
		s.m.reports.Inc()
		return tx.Bucket(bToReport).Delete(u64(uint64(w)))
	})
}

// Receipts returns the co-signed receipts this node holds of did, in pair
// and sequence order.
func (s *Service) Receipts(did string) ([]*receipt.Receipt, error) {
	rs, err := s.db.receiptsOf(did)
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].PairKey() != rs[j].PairKey() {
			return rs[i].PairKey() < rs[j].PairKey()
		}
		return rs[i].Seq < rs[j].Seq
	})
	return rs, err
}

// Reports returns the reports this node holds of did.
func (s *Service) Reports(did string) ([]*receipt.Report, error) {
	var out []*receipt.Report
	err := s.db.b.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bReports).Cursor()
		pfx := append([]byte(did), 0)
		for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			r, err := receipt.DecodeReport(v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// Fetch asks did itself (when connected) and up to eight other connected
// peers for did's receipts and reports, and keeps every one that verifies.
// It returns how many new receipts it stored.
func (s *Service) Fetch(ctx context.Context, did string) (int, error) {
	var targets []string
	if p, err := identity.PeerIDFromDID(did); err == nil && s.host.Network().Connectedness(p) == network.Connected && did != s.did {
		targets = append(targets, did)
	}
	for _, p := range s.host.Network().Peers() {
		if len(targets) >= 9 {
			break
		}
		if d, err := identity.DIDFromPeerID(p); err == nil && d != did {
			targets = append(targets, d)
		}
	}
	stored := 0
	var lastErr error
	for _, t := range targets {
		n, err := s.fetchFrom(ctx, t, did)
		stored += n
		if err != nil {
			lastErr = err
		}
	}
	if len(targets) == 0 {
		return 0, fmt.Errorf("no connected peer to ask for %s's receipts", did)
	}
	return stored, lastErr
}

func (s *Service) fetchFrom(ctx context.Context, from, did string) (int, error) {
	m, _ := didcomm.NewMessage(TypeQuery, QueryBody{Node: did})
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	reply, err := s.agent.Request(ctx, from, m)
	if err != nil {
		return 0, err
	}
	var a AnswerBody
	if err := json.Unmarshal(reply.Body, &a); err != nil {
		return 0, fmt.Errorf("answer from %s: %w", from, err)
	}
	n := 0
	for _, raw := range a.Receipts[:min(len(a.Receipts), maxAnswerReceipts)] {
		// Only what was asked for: an answer cannot fill this node's
		// store with other pairs' receipts.
		if r, err := receipt.Decode(raw); err != nil || !r.Has(did) {
			continue
		}
		ok, err := s.Ingest(raw)
		if err != nil {
			s.log.Info("accounting: fetched receipt refused", "from", from, "err", err)
			continue
		}
		if ok {
			n++
		}
	}
	for _, raw := range a.Reports {
		rep, err := receipt.DecodeReport(raw)
		if err != nil || rep.Node != did {
			continue
		}
		s.db.b.Update(func(tx *bolt.Tx) error { return tx.Bucket(bReports).Put(key(rep.Node, uint64(rep.WindowStart)), raw) })
	}
	return n, nil
}

// Ingest stores a co-signed receipt learnt from elsewhere once it
// verifies, and reports whether it was new. One that contradicts a stored
// receipt (same pair and seq, other content) becomes a fork proof, which
// is stored and spread.
func (s *Service) Ingest(raw []byte) (bool, error) {
	r, err := receipt.Decode(raw)
	if err == nil {
		err = r.Verify()
	}
	if err == nil && r.Disputed {
		err = errors.New("a disputed receipt is not part of a chain")
	}
	if err != nil {
		s.m.receipts.WithLabelValues("refused", "invalid").Inc()
		return false, err
	}
	isNew := false
	var forkWith *receipt.Receipt
	err = s.db.b.Update(func(tx *bolt.Tx) error {
		had := tx.Bucket(bReceipts).Get(key(r.PairKey(), r.Seq)) != nil
		old, err := putReceipt(tx, r)
		if errors.Is(err, errFork) {
			forkWith = old
			return nil
		}
		isNew = !had && err == nil
		return err
	})
	if forkWith != nil {
		s.forkFound(forkWith, r)
		return false, fmt.Errorf("pair %s seq %d: a different co-signed receipt is stored: fork proof built", r.PairKey(), r.Seq)
	}
	return isNew, err
}

// handleReport serves report/1.0 queries.
func (s *Service) handleReport(_ context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
	msg := u.Message
	if msg.Type != TypeQuery {
		return nil, problem(didcomm.CodeUnsupportedType, "report/1.0 has no message %s", msg.Type)
	}
	var q QueryBody
	if err := json.Unmarshal(msg.Body, &q); err != nil {
		return nil, problem(didcomm.CodeMalformed, "query body: %v", err)
	}
	if _, err := identity.PublicKeyFromDID(q.Node); err != nil {
		return nil, problem(didcomm.CodeMalformed, "node %q: %v", q.Node, err)
	}
	rs, err := s.Receipts(q.Node)
	if err != nil {
		return nil, err
	}
	a := AnswerBody{Receipts: [][]byte{}, Reports: [][]byte{}}
	for _, r := range rs[:min(len(rs), maxAnswerReceipts)] {
		raw, _ := r.Encode()
		a.Receipts = append(a.Receipts, raw)
	}
	reps, _ := s.Reports(q.Node)
	for _, r := range reps[max(0, len(reps)-64):] {
		raw, _ := r.Encode()
		a.Reports = append(a.Reports, raw)
	}
	out, err := didcomm.NewMessage(TypeQueryAnswer, a)
	if err != nil {
		return nil, err
	}
	out.Thid = msg.ID
	return out, nil
}

// ServeReceipts serves GET ?node=DID[&fetch=1]: a JSON array of the
// node's receipts (receipt.JSON), fetched from the mesh first when this
// node holds none of them or fetch is set. It is mounted on the relay port
// (/accounting/receipts) and on the control socket.
func (s *Service) ServeReceipts(w http.ResponseWriter, r *http.Request) {
	did := r.URL.Query().Get("node")
	if did == "" {
		did = s.did
	}
	if _, err := identity.PublicKeyFromDID(did); err != nil {
		http.Error(w, fmt.Sprintf("node %q: %v (give ?node=did:key:…)", did, err), http.StatusBadRequest)
		return
	}
	rs, err := s.Receipts(did)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if did != s.did && (len(rs) == 0 || r.URL.Query().Get("fetch") == "1") {
		if _, err := s.Fetch(r.Context(), did); err != nil {
			s.log.Info("accounting: fetching receipts", "node", did, "err", err)
		}
		rs, _ = s.Receipts(did)
	}
	out := make([]receipt.JSON, 0, len(rs))
	for _, rc := range rs {
		j, err := rc.ToJSON()
		if err != nil {
			continue
		}
		out = append(out, j)
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}

// ServeReports serves GET ?node=DID: the node's reports held here, each
// as base64url canonical bytes.
func (s *Service) ServeReports(w http.ResponseWriter, r *http.Request) {
	did := r.URL.Query().Get("node")
	if did == "" {
		did = s.did
	}
	reps, err := s.Reports(did)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	type item struct {
		WindowStart int64    `json:"window_start"`
		Receipts    int      `json:"receipts"`
		Disputed    []string `json:"disputed"`
		Raw         []byte   `json:"raw"`
	}
	out := []item{}
	for _, rep := range reps {
		it := item{WindowStart: rep.WindowStart, Receipts: len(rep.Receipts), Disputed: []string{}}
		for _, d := range rep.Disputed {
			if rc, err := receipt.Decode(d); err == nil {
				it.Disputed = append(it.Disputed, rc.PairKey())
			}
		}
		it.Raw, _ = rep.Encode()
		out = append(out, it)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}
