package accounting

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
)

// report/1.0: ask a node for another node's receipts and reports, a page
// at a time (the DIDComm binding of what the sync protocol's RECEIPTS
// frame does on the mesh).
const (
	PIURIReport     = "https://fleetmesh.org/protocols/report/1.0"
	TypeQuery       = PIURIReport + "/query"
	TypeQueryAnswer = PIURIReport + "/receipts"
)

// QueryBody asks for node's receipts and reports after the cursor After
// ("" from the first).
type QueryBody struct {
	Node  string `json:"node"`
	After string `json:"after,omitempty"`
}

// AnswerBody answers a query with one page.
type AnswerBody = receipt.Page

// PageFetcher asks peer p for one page of node's receipts and reports
// after a cursor (meshsync.Service.FetchReceipts, over the mesh's sync
// protocol).
type PageFetcher func(ctx context.Context, p peer.ID, node, after string) (receipt.Page, error)

// maxFetchPages bounds the pages one fetch reads from one peer: 600,000
// receipts.
const maxFetchPages = 1000

// fetchPageTimeout bounds the reading of one fetched page.
const fetchPageTimeout = 30 * time.Second

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

// publish signs the report of window w, in pages (receipt.SplitReport),
// from the window index: the node's own co-signed and disputed receipts
// of w, read by key. Pages of an earlier report of w go.
func (s *Service) publish(w int64) error {
	return s.db.b.Update(func(tx *bolt.Tx) error {
		receipts, disputed := [][]byte{}, [][]byte{}
		c := tx.Bucket(bByWindow).Cursor()
		pfx := u64(uint64(w))
		for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			pair := string(k[len(pfx)+1:])
			switch k[len(pfx)] {
			case 'r':
				if raw := tx.Bucket(bReceipts).Get(key(pair, binary.BigEndian.Uint64(v))); raw != nil {
					receipts = append(receipts, bytes.Clone(raw))
				}
			case 'd':
				if raw := tx.Bucket(bDisputed).Get(key(pair, uint64(w))); raw != nil {
					disputed = append(disputed, bytes.Clone(raw))
				}
			}
		}
		if err := deleteReport(tx, s.did, w); err != nil {
			return err
		}
		for _, rep := range receipt.SplitReport(s.did, w, s.meter.Length(), receipts, disputed) {
			if err := rep.Sign(s.key); err != nil {
				return err
			}
			raw, err := rep.Encode()
			if err != nil {
				return err
			}
			if err := tx.Bucket(bReports).Put(reportKey(s.did, w, rep.Page), raw); err != nil {
				return err
			}
		}
		s.m.reports.Inc()
		return tx.Bucket(bToReport).Delete(u64(uint64(w)))
	})
}

// deleteReport removes every stored page of node's report of window w.
func deleteReport(tx *bolt.Tx, node string, w int64) error {
	c := tx.Bucket(bReports).Cursor()
	pfx := key(node, uint64(w))
	for k, _ := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = c.Seek(pfx) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
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

// Reports returns the report pages this node holds of did, in window and
// page order (receipt.CheckPages tells whether a window's are all there).
// Each was verified when this node signed or took it in (ingestReport),
// so it is read back by form only (receipt.ParseReport). A page that does
// not parse is an error naming it, never left out.
func (s *Service) Reports(did string) ([]*receipt.Report, error) {
	var out []*receipt.Report
	err := s.db.b.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bReports).Cursor()
		pfx := append([]byte(did), 0)
		for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			r, err := receipt.ParseReport(v)
			if err != nil {
				return fmt.Errorf("accounting: stored report of %s window %d: %w", did, binary.BigEndian.Uint64(k[len(pfx):]), err)
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// SetFetcher sets how Fetch asks a peer for a page: the node gives it the
// sync protocol's client.
func (s *Service) SetFetcher(f PageFetcher) { s.fetcher.Store(&f) }

// Fetch asks did itself (when connected) and up to eight other connected
// peers for all of did's receipts and reports, page by page, and keeps
// every one that verifies; a fetched receipt (alone or in a report) that
// contradicts a stored one becomes a fork proof. It returns how many new
// receipts it stored.
func (s *Service) Fetch(ctx context.Context, did string) (int, error) {
	fp := s.fetcher.Load()
	if fp == nil || *fp == nil {
		return 0, errors.New("accounting: this node has no way to fetch from the mesh")
	}
	var targets []peer.ID
	if p, err := identity.PeerIDFromDID(did); err == nil && s.host.Network().Connectedness(p) == network.Connected && did != s.did {
		targets = append(targets, p)
	}
	for _, p := range s.host.Network().Peers() {
		if len(targets) >= 9 {
			break
		}
		if d, err := identity.DIDFromPeerID(p); err == nil && d != did {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		return 0, fmt.Errorf("no connected peer to ask for %s's receipts", did)
	}
	stored := 0
	var lastErr error
	for _, p := range targets {
		n, err := s.fetchFrom(ctx, *fp, p, did)
		stored += n
		if err != nil {
			lastErr = err
		}
	}
	return stored, lastErr
}

func (s *Service) fetchFrom(ctx context.Context, fetch PageFetcher, p peer.ID, did string) (int, error) {
	n, after := 0, ""
	for range maxFetchPages {
		// Each page has its own deadline: a chain or a report of many
		// pages takes as long as its pages, each bounded.
		pctx, cancel := context.WithTimeout(ctx, fetchPageTimeout)
		pg, err := fetch(pctx, p, did, after)
		cancel()
		if err != nil {
			return n, fmt.Errorf("fetching %s's receipts from %s: %w", did, p, err)
		}
		var rs []*receipt.Receipt
		for _, raw := range pg.Receipts[:min(len(pg.Receipts), receipt.MaxPageReceipts)] {
			// Only what was asked for: an answer cannot fill this
			// node's store with other pairs' receipts.
			r, err := receipt.Decode(raw)
			if err != nil || !r.Has(did) {
				continue
			}
			rs = append(rs, r)
		}
		k, errs := s.ingest(rs, false)
		n += k
		for _, err := range errs {
			s.log.Info("accounting: fetched receipt refused", "from", p, "err", err)
		}
		for _, raw := range pg.Reports[:min(len(pg.Reports), receipt.MaxPageReports)] {
			if err := s.ingestReport(raw, did); err != nil {
				s.log.Info("accounting: fetched report refused", "from", p, "err", err)
			}
		}
		if pg.Next == "" || pg.Next == after {
			return n, nil
		}
		after = pg.Next
	}
	return n, nil
}

// ingestReport keeps a report page of did once it verifies, and checks
// every co-signed receipt in it against the receipts held (ingest), so
// that a report carrying the other side of a fork is caught.
func (s *Service) ingestReport(raw []byte, did string) error {
	rep, err := receipt.ParseReport(raw)
	if err != nil {
		return err
	}
	// A receipt held already, byte for byte (fetched just before, as a
	// fetch does), was verified when it was taken in.
	err = s.db.b.View(func(tx *bolt.Tx) error {
		return rep.VerifyExcept(func(rc []byte) bool {
			r, err := receipt.Decode(rc)
			return err == nil && bytes.Equal(tx.Bucket(bReceipts).Get(key(r.PairKey(), r.Seq)), rc)
		})
	})
	if err != nil {
		return err
	}
	if rep.Node != did {
		return fmt.Errorf("a report of %s, not of %s", rep.Node, did)
	}
	rs := make([]*receipt.Receipt, 0, len(rep.Receipts))
	for _, rc := range rep.Receipts {
		if r, err := receipt.Decode(rc); err == nil {
			rs = append(rs, r)
		}
	}
	if _, errs := s.ingest(rs, true); len(errs) > 0 {
		s.log.Info("accounting: a receipt in a fetched report", "node", did, "window", rep.WindowStart, "err", errs[0], "refused", len(errs))
	}
	return s.db.b.Update(func(tx *bolt.Tx) error {
		// A page of a report with another page count (the node
		// re-reported the window) replaces every page of the old one.
		c := tx.Bucket(bReports).Cursor()
		pfx := key(rep.Node, uint64(rep.WindowStart))
		for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			if old, err := receipt.ParseReport(v); err != nil || old.PageCount() != rep.PageCount() {
				if err := deleteReport(tx, rep.Node, rep.WindowStart); err != nil {
					return err
				}
				break
			}
		}
		return tx.Bucket(bReports).Put(reportKey(rep.Node, rep.WindowStart, rep.Page), raw)
	})
}

// Ingest stores a co-signed receipt learnt from elsewhere once it
// verifies, and reports whether it was new. One that contradicts a stored
// receipt (same pair and seq, other content) becomes a fork proof, which
// is stored and spread.
func (s *Service) Ingest(raw []byte) (bool, error) {
	r, err := receipt.Decode(raw)
	if err != nil {
		s.m.receipts.WithLabelValues("refused", "invalid").Inc()
		return false, err
	}
	n, errs := s.ingest([]*receipt.Receipt{r}, false)
	if len(errs) > 0 {
		return false, errs[0]
	}
	return n == 1, nil
}

// ingest stores the co-signed receipts rs that verify (verified: they
// were, as a report's are when it decodes), in one transaction, and
// returns how many were new and why each other was refused. One that
// contradicts a stored receipt becomes a fork proof.
func (s *Service) ingest(rs []*receipt.Receipt, verified bool) (int, []error) {
	var errs []error
	ok := rs[:0:0]
	for _, r := range rs {
		var err error
		if !verified {
			err = r.Verify()
		}
		if err == nil && r.Disputed {
			err = errors.New("a disputed receipt is not part of a chain")
		}
		if err != nil {
			s.m.receipts.WithLabelValues("refused", "invalid").Inc()
			errs = append(errs, err)
			continue
		}
		ok = append(ok, r)
	}
	if len(ok) == 0 {
		return 0, errs
	}
	isNew := 0
	var forks [][2]*receipt.Receipt
	err := s.db.b.Update(func(tx *bolt.Tx) error {
		isNew, forks = 0, nil
		for _, r := range ok {
			had := tx.Bucket(bReceipts).Get(key(r.PairKey(), r.Seq)) != nil
			old, err := putReceipt(tx, r)
			if errors.Is(err, errFork) {
				forks = append(forks, [2]*receipt.Receipt{old, r})
				continue
			}
			if err != nil {
				return err
			}
			if !had {
				isNew++
			}
		}
		return nil
	})
	if err != nil {
		return 0, append(errs, err)
	}
	for _, f := range forks {
		s.forkFound(f[0], f[1])
		errs = append(errs, fmt.Errorf("pair %s seq %d: a different co-signed receipt is stored: fork proof built", f[1].PairKey(), f[1].Seq))
	}
	return isNew, errs
}

// cursor is a page's position: the key of the last receipt sent (pair \0
// seq) and of the last report page sent (node \0 window page). It travels as base64url
// JSON, opaque to the asker.
type cursor struct {
	Receipt []byte `json:"r,omitempty"`
	Report  []byte `json:"p,omitempty"`
}

func parseCursor(s string) (cursor, error) {
	var c cursor
	if s == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&c)
	}
	if err != nil || len(c.Receipt) > 1024 || len(c.Report) > 1024 {
		return c, fmt.Errorf("invalid cursor %q: give the next cursor of the previous page, or none", s)
	}
	return c, nil
}

func (c cursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Page returns one page of the co-signed receipts (in pair and seq order)
// and reports (in window order) of node that this node holds, after the
// cursor after ("" for the first page); Next is "" after the last page.
// Any node answers for any node.
func (s *Service) Page(node, after string) (receipt.Page, error) {
	return s.page(node, after, true, true)
}

func (s *Service) page(node, after string, receipts, reports bool) (receipt.Page, error) {
	pg := receipt.Page{Receipts: [][]byte{}, Reports: [][]byte{}}
	if _, err := identity.PublicKeyFromDID(node); err != nil {
		return pg, fmt.Errorf("node %q: %v", node, err)
	}
	c, err := parseCursor(after)
	if err != nil {
		return pg, err
	}
	next, more, size := c, false, 0
	full := func(n, max, add int) bool { return n == max || n > 0 && size+add > receipt.MaxPageBytes }
	err = s.db.b.View(func(tx *bolt.Tx) error {
		if receipts {
			// From the index: node \0 pair \0 seq, in pair and seq order.
			cur := tx.Bucket(bByNode).Cursor()
			pfx := append([]byte(node), 0)
			start := pfx
			if c.Receipt != nil {
				start = append(bytes.Clone(pfx), c.Receipt...)
			}
			k, _ := cur.Seek(start)
			if c.Receipt != nil && k != nil && bytes.Equal(k, start) {
				k, _ = cur.Next()
			}
			for ; k != nil && bytes.HasPrefix(k, pfx); k, _ = cur.Next() {
				v := tx.Bucket(bReceipts).Get(k[len(pfx):])
				if v == nil {
					return fmt.Errorf("accounting: the index names a missing receipt %q", k[len(pfx):])
				}
				if full(len(pg.Receipts), s.pageReceipts, len(v)) {
					more = true
					break
				}
				size += len(v)
				pg.Receipts = append(pg.Receipts, bytes.Clone(v))
				next.Receipt = bytes.Clone(k[len(pfx):])
			}
		}
		if reports {
			cur := tx.Bucket(bReports).Cursor()
			pfx := append([]byte(node), 0)
			k, v := cur.Seek(pfx)
			if c.Report != nil {
				if k, v = cur.Seek(c.Report); k != nil && bytes.Equal(k, c.Report) {
					k, v = cur.Next()
				}
			}
			for ; k != nil && bytes.HasPrefix(k, pfx); k, v = cur.Next() {
				if full(len(pg.Reports), s.pageReports, len(v)) || more {
					more = true
					break
				}
				size += len(v)
				pg.Reports = append(pg.Reports, bytes.Clone(v))
				next.Report = bytes.Clone(k)
			}
		}
		return nil
	})
	if more {
		pg.Next = next.String()
	}
	return pg, err
}

// handleReport serves report/1.0 queries, a page at a time.
func (s *Service) handleReport(_ context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
	msg := u.Message
	if msg.Type != TypeQuery {
		return nil, problem(didcomm.CodeUnsupportedType, "report/1.0 has no message %s", msg.Type)
	}
	var q QueryBody
	if err := json.Unmarshal(msg.Body, &q); err != nil {
		return nil, problem(didcomm.CodeMalformed, "query body: %v", err)
	}
	pg, err := s.Page(q.Node, q.After)
	if err != nil {
		return nil, problem(didcomm.CodeMalformed, "%v", err)
	}
	out, err := didcomm.NewMessage(TypeQueryAnswer, pg)
	if err != nil {
		return nil, err
	}
	out.Thid = msg.ID
	return out, nil
}

// NextHeader carries the cursor of the next page of an HTTP answer
// (absent after the last page).
const NextHeader = "Fleetmesh-Next"

// servePage answers a GET ?node=DID[&fetch=1][&after=CURSOR] with one page
// of what this node holds of did. On the first page (no cursor) it
// fetches from the mesh first when this node holds none of it or fetch=1.
func (s *Service) servePage(w http.ResponseWriter, r *http.Request, receipts bool, write func(receipt.Page) any) {
	q := r.URL.Query()
	did := q.Get("node")
	if did == "" {
		did = s.did
	}
	if _, err := identity.PublicKeyFromDID(did); err != nil {
		http.Error(w, fmt.Sprintf("node %q: %v (give ?node=did:key:…)", did, err), http.StatusBadRequest)
		return
	}
	after := q.Get("after")
	pg, err := s.page(did, after, receipts, !receipts)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	held := len(pg.Receipts) + len(pg.Reports)
	asked := q.Get("fetch") == "1"
	if did != s.did && after == "" && (held == 0 || asked) {
		if gate, _ := r.Context().Value(fetchGateKey{}).(fetchGate); gate != nil && !gate(w, r, asked) {
			if asked {
				return // gate answered
			}
		} else if _, err := s.Fetch(r.Context(), did); err != nil {
			s.log.Info("accounting: fetching from the mesh", "node", did, "err", err)
		}
		if pg, err = s.page(did, after, receipts, !receipts); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if pg.Next != "" {
		w.Header().Set(NextHeader, pg.Next)
	}
	writeJSON(w, write(pg))
}

// ServeReceipts serves GET ?node=DID[&fetch=1][&after=CURSOR]: one page
// (at most receipt.MaxPageReceipts) of the node's co-signed receipts held
// here, in pair and seq order, as a JSON array of receipt.JSON, the next
// page's cursor in the Fleetmesh-Next header. It is mounted on the relay
// port (/accounting/receipts) and on the control socket.
func (s *Service) ServeReceipts(w http.ResponseWriter, r *http.Request) {
	s.servePage(w, r, true, func(pg receipt.Page) any {
		out := make([]receipt.JSON, 0, len(pg.Receipts))
		for _, raw := range pg.Receipts {
			rc, err := receipt.Decode(raw)
			if err != nil {
				continue
			}
			if j, err := rc.ToJSON(); err == nil {
				out = append(out, j)
			}
		}
		return out
	})
}

// ReportJSON is one report page as /accounting/reports lists it, from
// the pages held (verified when taken in; Raw is there for the reader to
// verify again). A page held that does not parse is listed with Error,
// never left out.
type ReportJSON struct {
	WindowStart int64    `json:"window_start"`
	Page        uint32   `json:"page"`
	Pages       uint32   `json:"pages"`
	Receipts    int      `json:"receipts"`
	Disputed    []string `json:"disputed"`
	Raw         []byte   `json:"raw"`
	Error       string   `json:"error,omitempty"`
}

// ServeReports serves GET ?node=DID[&fetch=1][&after=CURSOR]: one page (at
// most receipt.MaxPageReports) of the node's report pages held here, in
// window and page order, each with its canonical bytes, paged and fetched
// as ServeReceipts.
func (s *Service) ServeReports(w http.ResponseWriter, r *http.Request) {
	s.servePage(w, r, false, func(pg receipt.Page) any {
		out := []ReportJSON{}
		for _, raw := range pg.Reports {
			rep, err := receipt.ParseReport(raw)
			if err != nil {
				out = append(out, ReportJSON{Disputed: []string{}, Raw: raw, Error: err.Error()})
				continue
			}
			it := ReportJSON{WindowStart: rep.WindowStart, Page: rep.Page, Pages: rep.PageCount(), Receipts: len(rep.Receipts), Disputed: []string{}, Raw: raw}
			for _, d := range rep.Disputed {
				if rc, err := receipt.Decode(d); err == nil {
					it.Disputed = append(it.Disputed, rc.PairKey())
				}
			}
			out = append(out, it)
		}
		return out
	})
}
