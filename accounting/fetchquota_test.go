package accounting

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/receipt"
)

// TestFetchQuota: GET /accounting/receipts?node=DID&fetch=1 on the relay
// port makes this node fetch from the mesh at most fetch_per_minute times
// a minute for one address; past that it answers 429 with Retry-After
// and fetches nothing, while another address, and the operator on the
// control socket, still fetch.
func TestFetchQuota(t *testing.T) {
	nodes := newNodes(t, 2, testConfig(), nil)
	n := nodes[0]
	var fetches atomic.Int64
	f := *n.s.fetcher.Load()
	n.s.SetFetcher(func(ctx context.Context, p peer.ID, node, after string) (receipt.Page, error) {
		fetches.Add(1)
		return f(ctx, p, node, after)
	})
	receipts, _ := n.s.PublicHandlers(func(r *http.Request) string { return clientaddr.Of(r.RemoteAddr).Narrow })
	other := nodes[1].key.DID()
	get := func(h http.HandlerFunc, from, query string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/accounting/receipts?node="+other+query, nil)
		r.RemoteAddr = from + ":40000"
		w := httptest.NewRecorder()
		h(w, r)
		return w
	}
	per := DefaultConfig().FetchPerMinute
	if n.s.cfg.FetchPerMinute != per || per != 10 {
		t.Fatalf("fetch_per_minute is %d, the interface says 10", n.s.cfg.FetchPerMinute)
	}
	for i := range per {
		if w := get(receipts, "127.0.0.9", "&fetch=1"); w.Code != http.StatusOK {
			t.Fatalf("fetch %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	if got := fetches.Load(); got != int64(per) {
		t.Fatalf("%d fetches from the mesh for %d requests", got, per)
	}
	w := get(receipts, "127.0.0.9", "&fetch=1")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.HasPrefix(w.Body.String(), "rate-limited:") {
		t.Fatalf("fetch %d: %d %q %s, want 429 with Retry-After", per+1, w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	// Without fetch=1 it gets what is held, fetching nothing.
	if w := get(receipts, "127.0.0.9", ""); w.Code != http.StatusOK {
		t.Fatalf("without fetch=1: %d", w.Code)
	}
	if got := fetches.Load(); got != int64(per) {
		t.Fatalf("refused requests fetched: %d fetches", got)
	}
	if w := get(receipts, "127.0.0.10", "&fetch=1"); w.Code != http.StatusOK || fetches.Load() != int64(per)+1 {
		t.Fatalf("another address: %d, %d fetches", w.Code, fetches.Load())
	}
	if w := get(n.s.ServeReceipts, "127.0.0.9", "&fetch=1"); w.Code != http.StatusOK || fetches.Load() != int64(per)+2 {
		t.Fatalf("the operator: %d, %d fetches", w.Code, fetches.Load())
	}
}

// TestFetchQuotaWindow: the quota is per minute, sliding.
func TestFetchQuotaWindow(t *testing.T) {
	q := newFetchQuota(10)
	at := time.Unix(1_800_000_000, 0)
	for i := range 10 {
		if ok, _ := q.allow("a", at.Add(time.Duration(i)*time.Second)); !ok {
			t.Fatalf("fetch %d refused", i)
		}
	}
	if ok, wait := q.allow("a", at.Add(30*time.Second)); ok || wait != 30*time.Second {
		t.Fatalf("11th within the minute: %v, wait %s", ok, wait)
	}
	if ok, _ := q.allow("a", at.Add(time.Minute)); !ok {
		t.Fatal("refused a minute after the first")
	}
	if ok, _ := q.allow("a", at.Add(time.Minute)); ok {
		t.Fatal("a second one a minute after the first, with nine in the minute")
	}
}
