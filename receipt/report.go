package receipt

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/canon"
)

// ReportSignaturePrefix is prepended to a report's canonical bytes before
// signing.
const ReportSignaturePrefix = "fleetmesh report v1\x00"

// MaxReportItems bounds the receipts, co-signed and disputed, in one page
// of a report (spec/receipts.md "Report"): a receipt is at most about
// 1 KiB (TestReportPageFits), so a full page stays under the 64 KiB a
// record may be, whatever the figures.
const MaxReportItems = 48

// Report is one page of one node's signed publication of one window, made
// after the window's dispute period: the co-signed receipts of that window
// and the disputed receipts of the windows it could not agree on, split
// into Pages pages of at most MaxReportItems each, each page signed on
// its own so that it verifies alone (Verify) and a reader with all of them
// holds the whole report (CheckPages).
type Report struct {
	V           int    `cbor:"v"`
	Node        string `cbor:"node"`
	WindowStart int64  `cbor:"window_start"`
	WindowSecs  int64  `cbor:"window_secs"`
	// Page numbers the page from 0 and Pages counts them; both are
	// omitted in a report of one page, which encodes as before pages.
	Page     uint32   `cbor:"page,omitempty"`
	Pages    uint32   `cbor:"pages,omitempty"`
	Receipts [][]byte `cbor:"receipts"`
	Disputed [][]byte `cbor:"disputed"`
	Sig      []byte   `cbor:"sig,omitempty"`
}

// PageCount is the number of pages of the report this page belongs to.
func (r *Report) PageCount() uint32 { return max(r.Pages, 1) }

// SplitReport is the unsigned pages of node's report of one window: the
// co-signed receipts, then the disputed ones, MaxReportItems to a page;
// one page when there is nothing to report.
func SplitReport(node string, window, secs int64, receipts, disputed [][]byte) []*Report {
	items := len(receipts) + len(disputed)
	n := max((items+MaxReportItems-1)/MaxReportItems, 1)
	out := make([]*Report, n)
	for i := range out {
		out[i] = &Report{V: Version, Node: node, WindowStart: window, WindowSecs: secs, Receipts: [][]byte{}, Disputed: [][]byte{}}
		if n > 1 {
			out[i].Page, out[i].Pages = uint32(i), uint32(n)
		}
	}
	for i, raw := range receipts {
		pg := out[i/MaxReportItems]
		pg.Receipts = append(pg.Receipts, raw)
	}
	for i, raw := range disputed {
		pg := out[(len(receipts)+i)/MaxReportItems]
		pg.Disputed = append(pg.Disputed, raw)
	}
	return out
}

// CheckPages checks that pages, each already verified, are one whole
// report: one node and window, every page from 0 to Pages-1 exactly once,
// all saying the same number of pages.
func CheckPages(pages []*Report) error {
	if len(pages) == 0 {
		return errors.New("report: no pages")
	}
	first := pages[0]
	n := first.PageCount()
	if uint32(len(pages)) != n {
		return fmt.Errorf("report of %s window %d: %d pages held of %d", first.Node, first.WindowStart, len(pages), n)
	}
	seen := make([]bool, n)
	for _, p := range pages {
		if p.Node != first.Node || p.WindowStart != first.WindowStart || p.WindowSecs != first.WindowSecs || p.PageCount() != n {
			return fmt.Errorf("report of %s window %d: page %d is of another report (%s window %d, %d pages)", first.Node, first.WindowStart, p.Page, p.Node, p.WindowStart, p.PageCount())
		}
		if seen[p.Page] {
			return fmt.Errorf("report of %s window %d: page %d twice", first.Node, first.WindowStart, p.Page)
		}
		seen[p.Page] = true
	}
	return nil
}

func (r *Report) signingBytes() ([]byte, error) {
	c := *r
	c.Sig = nil
	b, err := canon.Marshal(&c)
	if err != nil {
		return nil, err
	}
	return append([]byte(ReportSignaturePrefix), b...), nil
}

// Sign signs the report with the node's key.
func (r *Report) Sign(key *identity.Key) error {
	if key.DID() != r.Node {
		return fmt.Errorf("report: signed by %s, not its node %s", key.DID(), r.Node)
	}
	b, err := r.signingBytes()
	if err != nil {
		return err
	}
	r.Sig = key.Sign(b)
	return nil
}

// Encode returns the report's canonical bytes.
func (r *Report) Encode() ([]byte, error) { return canon.Marshal(r) }

// DecodeReport parses a report page and verifies its signature and every
// receipt in it.
func DecodeReport(data []byte) (*Report, error) {
	r, err := ParseReport(data)
	if err != nil {
		return nil, err
	}
	if err := r.Verify(); err != nil {
		return nil, err
	}
	return r, nil
}

// ParseReport parses a report page and checks its form (version, place,
// size), not its signatures: for a page a node verified when it took it
// in and reads back from its own store.
func ParseReport(data []byte) (*Report, error) {
	var r Report
	if err := canon.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if err := r.checkForm(); err != nil {
		return nil, err
	}
	return &r, nil
}

func (r *Report) checkForm() error {
	if r.V != Version {
		return fmt.Errorf("report: version %d, want %d", r.V, Version)
	}
	if r.Pages == 1 || r.Page >= r.PageCount() {
		return fmt.Errorf("report: page %d of %d (a one-page report omits both)", r.Page, r.Pages)
	}
	if len(r.Receipts)+len(r.Disputed) > MaxReportItems {
		return fmt.Errorf("report: %d receipts in one page, at most %d", len(r.Receipts)+len(r.Disputed), MaxReportItems)
	}
	return nil
}

// Verify checks the page's signature, its place (a page number below
// the page count, at most MaxReportItems receipts) and its receipts: each
// verifies, involves the node and lies in the report's window (co-signed
// ones), or is disputed and signed by the node (disputed ones).
func (r *Report) Verify() error { return r.VerifyExcept(nil) }

// VerifyExcept is Verify, save that a receipt for which held reports true
// (its exact bytes are held already, verified when they were taken in)
// is checked for its place in the report but its signatures are not
// verified again.
func (r *Report) VerifyExcept(held func(raw []byte) bool) error {
	if err := r.checkForm(); err != nil {
		return err
	}
	pub, err := identity.PublicKeyFromDID(r.Node)
	if err != nil {
		return fmt.Errorf("report: node: %w", err)
	}
	b, err := r.signingBytes()
	if err != nil {
		return err
	}
	if len(r.Sig) != ed25519.SignatureSize || !ed25519.Verify(pub, b, r.Sig) {
		return fmt.Errorf("report: %w", ErrSignature)
	}
	for i, raw := range r.Receipts {
		rc, err := Decode(raw)
		if err == nil && (held == nil || !held(raw)) {
			err = rc.Verify()
		}
		if err == nil && (rc.Disputed || !rc.Has(r.Node) || rc.WindowStart != r.WindowStart) {
			err = fmt.Errorf("not a co-signed receipt of %s for window %d", r.Node, r.WindowStart)
		}
		if err != nil {
			return fmt.Errorf("report: receipt %d: %w", i, err)
		}
	}
	for i, raw := range r.Disputed {
		rc, err := Decode(raw)
		if err == nil {
			err = rc.Verify()
		}
		if err == nil && (!rc.Disputed || !(rc.A == r.Node && rc.SigA != nil || rc.B == r.Node && rc.SigB != nil)) {
			err = fmt.Errorf("not a disputed receipt of %s", r.Node)
		}
		if err != nil {
			return fmt.Errorf("report: disputed %d: %w", i, err)
		}
	}
	return nil
}
