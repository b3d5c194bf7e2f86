package relay

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxTrackedAddrs bounds the per-address table; idle entries are dropped
// first when it is full.
const maxTrackedAddrs = 65536

// addrLimits holds, per address (an IPv4 address or an IPv6 /64, see
// keyOf), an event token bucket, the open WebSocket connections and sync
// sessions, and the address's REQ work budget; and per IPv6 /56 the open
// connections.
type addrLimits struct {
	cfg *Config

	mu    sync.Mutex
	addrs map[string]*addrState
	wide  map[string]int
}

type addrState struct {
	bucket *rate.Limiter
	conns  int
	negs   int
	work   workBudget
}

func newAddrLimits(cfg *Config) *addrLimits {
	return &addrLimits{cfg: cfg, addrs: make(map[string]*addrState), wide: make(map[string]int)}
}

func (l *addrLimits) state(k string) *addrState {
	st, ok := l.addrs[k]
	if !ok {
		if len(l.addrs) >= maxTrackedAddrs {
			l.evict()
		}
		st = &addrState{work: newWorkBudget(l.cfg.IPReqMillisPerSecond, l.cfg.IPReqRowsPerSecond)}
		if l.cfg.IPEventsPerSecond > 0 {
			st.bucket = rate.NewLimiter(rate.Limit(l.cfg.IPEventsPerSecond), l.cfg.IPEventsBurst)
		}
		l.addrs[k] = st
	}
	return st
}

// evict drops entries with no open connection or session whose buckets
// have refilled, which forgets nothing a limit depends on.
func (l *addrLimits) evict() {
	now := time.Now()
	for k, st := range l.addrs {
		if st.conns == 0 && st.negs == 0 && (st.bucket == nil || st.bucket.Tokens() >= float64(l.cfg.IPEventsBurst)) && st.work.full(now) {
			delete(l.addrs, k)
		}
	}
}

// openConn counts a WebSocket connection from k unless k is at its cap.
func (l *addrLimits) openConn(k addrKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(k.narrow)
	if st.conns >= l.cfg.MaxConnsPerIP {
		return false
	}
	if k.wide != "" && l.wide[k.wide] >= l.cfg.MaxConnsPerIP*ipv6WideFactor {
		return false
	}
	st.conns++
	if k.wide != "" {
		l.wide[k.wide]++
	}
	return true
}

func (l *addrLimits) closeConn(k addrKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.addrs[k.narrow]; ok && st.conns > 0 {
		st.conns--
	}
	if k.wide != "" {
		if l.wide[k.wide] <= 1 {
			delete(l.wide, k.wide)
		} else {
			l.wide[k.wide]--
		}
	}
}

func (l *addrLimits) allowEvent(k addrKey) bool {
	if l.cfg.IPEventsPerSecond <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state(k.narrow).bucket.Allow()
}

// openNeg counts a NIP-77 session from k unless k is at its cap.
func (l *addrLimits) openNeg(k addrKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(k.narrow)
	if st.negs >= l.cfg.IPMaxNegSessions {
		return false
	}
	st.negs++
	return true
}

func (l *addrLimits) closeNeg(k addrKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.addrs[k.narrow]; ok && st.negs > 0 {
		st.negs--
	}
}

// workWait says how long k must wait before its next query (0: now).
func (l *addrLimits) workWait(k addrKey) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state(k.narrow).work.wait(time.Now())
}

// spendWork charges k for a query's time and rows.
func (l *addrLimits) spendWork(k addrKey, d time.Duration, rows int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state(k.narrow).work.spend(time.Now(), d, rows)
}
