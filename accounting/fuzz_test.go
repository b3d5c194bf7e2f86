package accounting

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/grant"
	"fleetmesh.org/fleetmesh/receipt"
)

// FuzzMessages feeds arbitrary bodies to every message this package
// decodes: each is refused with a problem or handled, never a panic, and
// never leaves a receipt that does not verify.
func FuzzMessages(f *testing.F) {
	nodes := newNodes(f, 2, testConfig(), nil)
	s, from := nodes[0].s, nodes[1].key.DID()
	types := []string{exchange.TypePropose, exchange.TypeCountersign, exchange.TypeRequest, exchange.TypeForkProof, exchange.TypeDisputeOpen, TypeQuery, grant.TypeOffer, grant.TypeRevoke}
	seed, _ := json.Marshal(exchange.ProposeBody{WindowStart: t0.Unix(), WindowSecs: 10, Seq: 1})
	f.Add(uint8(0), seed)
	f.Add(uint8(1), []byte(`{"receipt":"oWF2AQ"}`))
	f.Add(uint8(3), []byte(`{"proof":""}`))
	f.Add(uint8(5), []byte(`{"node":"did:key:z6Mk"}`))
	f.Add(uint8(6), []byte(`{"grant":"oA"}`))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		if !json.Valid(body) {
			return
		}
		m := &didcomm.Message{ID: "x", Type: types[int(which)%len(types)], From: from, Body: body}
		u := &didcomm.Unpacked{Message: m, Authenticated: true}
		ctx := context.Background()
		switch {
		case m.Type == TypeQuery:
			s.handleReport(ctx, u)
		case m.Type == exchange.TypeDisputeOpen:
			s.handleDispute(ctx, u)
		case m.Type == grant.TypeOffer || m.Type == grant.TypeRevoke:
			s.handleGrant(ctx, u)
		default:
			s.handleReceipt(ctx, u)
		}
		rs, err := s.Receipts(s.DID())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if err := r.Verify(); err != nil {
				t.Fatalf("a stored receipt does not verify: %v", err)
			}
		}
	})
}

// FuzzCursor: a page cursor from anyone is read or refused, and one read
// writes back to a cursor that reads the same.
func FuzzCursor(f *testing.F) {
	for _, c := range []cursor{{}, {Receipt: []byte("a b\x00\x00\x00\x00\x00\x00\x00\x00\x01")}, {Report: reportKey("did:key:z6Mk", 3600, 2)}} {
		f.Add(c.String())
	}
	f.Add("not base64!")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(s)
		if err != nil {
			return
		}
		c2, err := parseCursor(c.String())
		if err != nil || string(c2.Receipt) != string(c.Receipt) || string(c2.Report) != string(c.Report) {
			t.Fatalf("%q read as %+v, rewritten as %+v (%v)", s, c, c2, err)
		}
	})
}

// FuzzFetchedPage feeds an arbitrary page answer (receipt.Page, as a peer
// answers a fetch) to the fetching side: it never panics, and keeps only
// receipts and report pages of the node asked for that verify.
func FuzzFetchedPage(f *testing.F) {
	nodes := newNodes(f, 2, testConfig(), nil)
	s, other := nodes[0].s, nodes[1]
	did := other.key.DID()
	f.Add([]byte(`{"receipts":["oWF2AQ"],"reports":[],"next":""}`))
	f.Add([]byte(`{"receipts":[],"reports":["oA"],"next":"x"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var pg receipt.Page
		if json.Unmarshal(body, &pg) != nil {
			return
		}
		pg.Next = ""
		fetch := func(context.Context, peer.ID, string, string) (receipt.Page, error) { return pg, nil }
		s.fetchFrom(context.Background(), fetch, other.h.ID(), did)
		rs, err := s.Receipts(did)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if err := r.Verify(); err != nil || !r.Has(did) {
				t.Fatalf("kept a receipt that does not verify or is not %s's: %v", did, err)
			}
		}
		reps, err := s.Reports(did)
		if err != nil {
			t.Fatal(err)
		}
		for _, rep := range reps {
			if err := rep.Verify(); err != nil || rep.Node != did {
				t.Fatalf("kept a report page that does not verify or is not %s's: %v", did, err)
			}
		}
	})
}
