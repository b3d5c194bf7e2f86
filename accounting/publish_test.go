package accounting

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/receipt"
)

// getPages reads every page of an HTTP listing (ServeReceipts,
// ServeReports) of node, the first with fetch=1.
func getPages[T any](t *testing.T, h http.HandlerFunc, node string) []T {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	q := url.Values{"node": {node}, "fetch": {"1"}}
	var all []T
	for pages := 0; ; pages++ {
		resp, err := http.Get(srv.URL + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var page []T
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d: %d %v", pages, resp.StatusCode, err)
		}
		all = append(all, page...)
		next := resp.Header.Get(NextHeader)
		if next == "" {
			return all
		}
		if pages > 20 {
			t.Fatal("the pages never end")
		}
		q.Del("fetch")
		q.Set("after", next)
	}
}

// TestFetchWholeChain: x keeps accounts with y and w. y, which shares one
// pair with x, answers for x's whole chain once it has fetched it (both
// pairs), and z, which holds none of x's receipts, fetches all of them
// and x's reports over the mesh's sync protocol, in pages, and verifies
// the chain with nothing else; both through the HTTP endpoint.
func TestFetchWholeChain(t *testing.T) {
	nodes := newNodes(t, 4, testConfig(), nil)
	x, y, w, z := nodes[0], nodes[1], nodes[2], nodes[3]
	for _, n := range nodes {
		n.s.pageReceipts, n.s.pageReports = 2, 2 // answers in several pages
	}
	for k := 1; k <= 3; k++ {
		traffic(x, y, uint64(k), 100)
		traffic(w, x, 2, 50)
		closeWindow(nodes, t0.Add(time.Duration(k)*window+time.Millisecond))
	}
	for _, n := range nodes {
		n.s.Round(context.Background(), t0.Add(8*window))
	}
	own, _ := x.s.Receipts(x.key.DID())
	if len(own) != 6 {
		t.Fatalf("x holds %d receipts, want 3 with each of y and w", len(own))
	}
	for _, c := range []struct {
		name string
		at   *testNode
	}{{"y (shares a pair)", y}, {"z (holds none)", z}} {
		js := getPages[receipt.JSON](t, c.at.s.ServeReceipts, x.key.DID())
		if len(js) != len(own) {
			t.Fatalf("%s: %d receipts of x over HTTP, want %d", c.name, len(js), len(own))
		}
		rs, _ := c.at.s.Receipts(x.key.DID())
		if k, err := receipt.VerifyChain(x.key.DID(), rs); err != nil || k != len(own) {
			t.Fatalf("%s: chain of %d: %v", c.name, k, err)
		}
		reps := getPages[ReportJSON](t, c.at.s.ServeReports, x.key.DID())
		if len(reps) != 3 {
			t.Fatalf("%s: %d reports of x, want 3", c.name, len(reps))
		}
		for _, rep := range reps {
			if _, err := receipt.DecodeReport(rep.Raw); err != nil || rep.Receipts != 2 {
				t.Fatalf("%s: report of window %d: %d receipts, %v", c.name, rep.WindowStart, rep.Receipts, err)
			}
		}
	}
	// A page's cursor is checked.
	if _, err := x.s.Page(x.key.DID(), "not a cursor"); err == nil {
		t.Fatal("a bad cursor was taken")
	}
}

// TestReportOf10000Counterparties: a node with co-signed receipts of one
// window with 10,000 counterparties publishes the window's report in
// signed pages, none over the record bound; its own Reports lists every
// page; and another node fetches them over the mesh's sync protocol and
// verifies each page alone and the whole report. (TestFetchWholeChain
// lists report pages over HTTP.)
func TestReportOf10000Counterparties(t *testing.T) {
	const peers = 10_000
	nodes := newNodes(t, 2, testConfig(), nil)
	x, z := nodes[0], nodes[1]
	w := t0.Unix()
	raws := manyReceipts(t, x, w, peers)
	if err := x.s.publish(w); err != nil {
		t.Fatal(err)
	}
	own, err := x.s.Reports(x.key.DID())
	if err != nil {
		t.Fatal(err)
	}
	wantPages := (peers + receipt.MaxReportItems - 1) / receipt.MaxReportItems
	if len(own) != wantPages {
		t.Fatalf("x holds %d pages of its report, want %d", len(own), wantPages)
	}
	if _, err := z.s.Fetch(context.Background(), x.key.DID()); err != nil {
		t.Fatal(err)
	}
	got, err := z.s.Reports(x.key.DID())
	if err != nil {
		t.Fatal(err)
	}
	if err := receipt.CheckPages(got); err != nil {
		t.Fatal(err)
	}
	// z verified every page as it took it in (ingestReport: each page
	// alone, with every receipt in it); CheckPages says they make one
	// report.
	seen := map[string]bool{}
	for _, p := range got {
		for _, raw := range p.Receipts {
			seen[string(raw)] = true
		}
	}
	for _, raw := range raws {
		if !seen[string(raw)] {
			t.Fatal("a receipt of the window is missing from the fetched report")
		}
	}
	if len(seen) != peers {
		t.Fatalf("the fetched report holds %d receipts, want %d", len(seen), peers)
	}
}

// manyReceipts stores, as n's own, co-signed receipts of window w with
// count new counterparties (seq 1 each), and returns their bytes.
func manyReceipts(t testing.TB, n *testNode, w int64, count int) [][]byte {
	t.Helper()
	raws := make([][]byte, count)
	err := n.s.db.b.Update(func(tx *bolt.Tx) error {
		for i := range raws {
			k, err := identity.GenerateKey()
			if err != nil {
				return err
			}
			a, b := receipt.Pair(n.key.DID(), k.DID())
			side := receipt.Side{Gave: receipt.Counts{Events: uint64(i), Bytes: uint64(300 * i)}}
			r := receipt.New(a, b, w, int64(window/time.Second), 1, cid.Undef, side, receipt.Side{Received: side.Gave})
			if err := r.Sign(n.key); err != nil {
				return err
			}
			if err := r.Sign(k); err != nil {
				return err
			}
			if err := n.s.storeOwn(tx, r, k.DID()); err != nil {
				return err
			}
			raws[i], _ = r.Encode()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return raws
}

// A report page held that does not parse is never left out: Reports
// fails naming it and ServeReports lists it with its error, beside the
// good pages.
func TestReportsNeverDropAPage(t *testing.T) {
	x := newNodes(t, 1, testConfig(), nil)[0]
	w := t0.Unix()
	manyReceipts(t, x, w, receipt.MaxReportItems+1)
	if err := x.s.publish(w); err != nil {
		t.Fatal(err)
	}
	x.s.db.b.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bReports).Put(reportKey(x.key.DID(), w+10, 0), []byte("not a report"))
	})
	if _, err := x.s.Reports(x.key.DID()); err == nil || !strings.Contains(err.Error(), fmt.Sprint(w+10)) {
		t.Fatalf("Reports with a bad page: %v", err)
	}
	listed := getPages[ReportJSON](t, x.s.ServeReports, x.key.DID())
	if len(listed) != 3 || listed[0].Error != "" || listed[1].Error != "" || listed[2].Error == "" {
		t.Fatalf("listed %+v", listed)
	}
	if listed[0].Pages != 2 || listed[1].Page != 1 {
		t.Fatalf("pages listed as %d/%d, %d/%d", listed[0].Page, listed[0].Pages, listed[1].Page, listed[1].Pages)
	}
}
