package meshsync

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio"

	"fleetmesh.org/fleetmesh/receipt"
)

// receiptsQuery is the RECEIPTS frame's third element (spec/mesh-sync.md
// "Receipts and reports").
type receiptsQuery struct {
	Node  string `json:"node"`
	After string `json:"after,omitempty"`
}

// receiptsEnd is the options of the EOSE that ends a RECEIPTS answer.
type receiptsEnd struct {
	Next string `json:"next"`
}

// parseReceiptsQuery reads a RECEIPTS frame's query; unknown members are
// refused, as NEG-OPEN's options are.
func parseReceiptsQuery(raw json.RawMessage) (receiptsQuery, error) {
	var q receiptsQuery
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil || dec.More() {
		return q, fmt.Errorf("invalid: RECEIPTS needs {\"node\": DID, \"after\": cursor}")
	}
	if q.Node == "" {
		return q, fmt.Errorf("invalid: RECEIPTS needs a node")
	}
	return q, nil
}

// serveReceipts answers a RECEIPTS frame with one page of the node's
// receipts and reports from Config.Receipts; a malformed frame is a
// protocol violation.
func (s *Service) serveReceipts(w msgio.Writer, parts []json.RawMessage, violation func()) error {
	var sub string
	if len(parts) != 3 || json.Unmarshal(parts[1], &sub) != nil {
		violation()
		return writeFrame(w, "CLOSED", sub, "invalid: RECEIPTS needs a subscription id and a query")
	}
	if s.cfg.Receipts == nil {
		return writeFrame(w, "CLOSED", sub, "unsupported: this node keeps no accounting records")
	}
	q, err := parseReceiptsQuery(parts[2])
	if err != nil {
		violation()
		return writeFrame(w, "CLOSED", sub, err.Error())
	}
	pg, err := s.cfg.Receipts(q.Node, q.After)
	if err != nil {
		return writeFrame(w, "CLOSED", sub, "invalid: "+err.Error())
	}
	for _, raw := range pg.Receipts[:min(len(pg.Receipts), receipt.MaxPageReceipts)] {
		if err := writeFrame(w, "RECEIPT", sub, base64.RawURLEncoding.EncodeToString(raw)); err != nil {
			return err
		}
	}
	for _, raw := range pg.Reports[:min(len(pg.Reports), receipt.MaxPageReports)] {
		if err := writeFrame(w, "REPORT", sub, base64.RawURLEncoding.EncodeToString(raw)); err != nil {
			return err
		}
	}
	return writeFrame(w, "EOSE", sub, receiptsEnd{Next: pg.Next})
}

// FetchReceipts asks p for one page of node's co-signed receipts and
// reports after the cursor after ("" for the first page), over the sync
// protocol. It checks the page's bounds and form, not the records: the
// caller verifies each before it keeps it.
func (s *Service) FetchReceipts(ctx context.Context, p peer.ID, node, after string) (receipt.Page, error) {
	pg := receipt.Page{Receipts: [][]byte{}, Reports: [][]byte{}}
	str, done, err := s.openBound(ctx, p)
	if err != nil {
		return pg, err
	}
	defer done()
	r, w := msgio.NewVarintReaderSize(str, MaxFrameBytes), msgio.NewVarintWriter(str)
	if err := writeFrame(w, "RECEIPTS", "receipts", receiptsQuery{Node: node, After: after}); err != nil {
		return pg, err
	}
	for {
		typ, parts, err := readFrame(r)
		if err != nil {
			return pg, fmt.Errorf("meshsync: receipts from %s: %w", p, err)
		}
		switch {
		case typ == "CLOSED" && len(parts) >= 3:
			return pg, fmt.Errorf("meshsync: %s refused RECEIPTS: %s", p, rawString(parts[2]))
		case typ == "EOSE" && len(parts) == 3:
			var end receiptsEnd
			if err := json.Unmarshal(parts[2], &end); err != nil {
				return pg, fmt.Errorf("meshsync: %s ended RECEIPTS without a cursor", p)
			}
			pg.Next = end.Next
			return pg, nil
		case (typ == "RECEIPT" || typ == "REPORT") && len(parts) == 3:
			raw, err := base64.RawURLEncoding.DecodeString(rawString(parts[2]))
			if err != nil {
				return pg, fmt.Errorf("meshsync: %s sent a %s that is not base64url", p, typ)
			}
			if typ == "RECEIPT" {
				pg.Receipts = append(pg.Receipts, raw)
			} else {
				pg.Reports = append(pg.Reports, raw)
			}
			if len(pg.Receipts) > receipt.MaxPageReceipts || len(pg.Reports) > receipt.MaxPageReports {
				return pg, fmt.Errorf("meshsync: %s sent more than a page", p)
			}
		default:
			return pg, fmt.Errorf("meshsync: %s sent %s in answer to RECEIPTS", p, typ)
		}
	}
}
