package accounting

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// fetchQuotaKeys bounds the addresses the fetch quota remembers
// (spec/limits.md "Accounting"): past it, addresses with no fetch in the
// last minute are forgotten, and if none is, a new address is refused
// until one is.
const fetchQuotaKeys = 4096

// fetchQuota allows each address at most per mesh fetches in any minute:
// it keeps the times of each address's fetches in the last minute.
type fetchQuota struct {
	per int
	mu  sync.Mutex
	m   map[string][]time.Time
}

func newFetchQuota(per int) *fetchQuota {
	return &fetchQuota{per: per, m: map[string][]time.Time{}}
}

// allow takes one fetch of key's allowance at now; when there is none it
// returns false and how long until there is.
func (q *fetchQuota) allow(key string, now time.Time) (bool, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	recent := func(ts []time.Time) []time.Time {
		i := 0
		for i < len(ts) && now.Sub(ts[i]) >= time.Minute {
			i++
		}
		return ts[i:]
	}
	ts, ok := q.m[key]
	if !ok && len(q.m) >= fetchQuotaKeys {
		for k, v := range q.m {
			if len(recent(v)) == 0 {
				delete(q.m, k)
			}
		}
		if len(q.m) >= fetchQuotaKeys {
			return false, time.Minute
		}
	}
	ts = recent(ts)
	if len(ts) >= q.per {
		q.m[key] = ts
		return false, time.Minute - now.Sub(ts[0])
	}
	q.m[key] = append(ts, now)
	return true, 0
}

// PublicHandlers returns ServeReceipts and ServeReports as the relay port
// serves them to anyone (GET /accounting/receipts, /accounting/reports):
// a request that would make this node fetch from the mesh (fetch=1, or a
// node of which it holds nothing) takes one of its address's
// fetch_per_minute fetches; past them a fetch=1 request is answered 429
// with Retry-After, and one without fetch=1 gets what this node holds.
// addr names the party behind a request (clientaddr, believing the
// relay's trusted proxies). The control socket, the operator's, has no
// quota.
func (s *Service) PublicHandlers(addr func(*http.Request) string) (receipts, reports http.HandlerFunc) {
	q := newFetchQuota(s.cfg.FetchPerMinute)
	gate := func(w http.ResponseWriter, r *http.Request, asked bool) bool {
		ok, wait := q.allow(addr(r), time.Now())
		if ok || !asked {
			return ok
		}
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(wait.Round(time.Second)/time.Second))))
		http.Error(w, fmt.Sprintf("rate-limited: at most %d mesh fetches a minute from one address (fetch_per_minute); ask without fetch=1 for what this node holds", s.cfg.FetchPerMinute), http.StatusTooManyRequests)
		return false
	}
	with := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			h(w, r.WithContext(context.WithValue(r.Context(), fetchGateKey{}, fetchGate(gate))))
		}
	}
	return with(s.ServeReceipts), with(s.ServeReports)
}

// fetchGate is asked, before a request makes this node fetch from the
// mesh, whether it may (asked: the client gave fetch=1); false skips the
// fetch, and when asked the gate has answered the request. It travels in
// the request's context under fetchGateKey (PublicHandlers).
type fetchGate func(w http.ResponseWriter, r *http.Request, asked bool) bool

type fetchGateKey struct{}
