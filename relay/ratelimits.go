package relay

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/workbudget"
)

// maxTrackedAddrs bounds the per-address table; idle entries are dropped
// first when it is full.
const maxTrackedAddrs = 65536

// addrLimits holds, per address (an IPv4 address or an IPv6 /64, see
// clientaddr.Key), an event token bucket, the open WebSocket connections and sync
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
	// invalid bounds the invalid messages of all the address's
	// connections (nil until its first).
	invalid *rate.Limiter
	conns   int
	negs    int
	subs    int
	work    workbudget.Budget
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
		st = &addrState{work: workbudget.New(l.cfg.IPReqMillisPerSecond, l.cfg.IPReqRowsPerSecond, l.cfg.largestWork())}
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
		if st.conns == 0 && st.negs == 0 && st.subs == 0 && (st.bucket == nil || st.bucket.Tokens() >= float64(l.cfg.IPEventsBurst)) &&
			(st.invalid == nil || st.invalid.TokensAt(now) >= ipInvalidBurst) && st.work.Full(now) {
			delete(l.addrs, k)
		}
	}
}

// openConn counts a WebSocket connection from k unless k is at its cap.
func (l *addrLimits) openConn(k clientaddr.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(k.Narrow)
	if st.conns >= l.cfg.MaxConnsPerIP {
		return false
	}
	if k.Wide != "" && l.wide[k.Wide] >= l.cfg.MaxConnsPerIP*ipv6WideFactor {
		return false
	}
	st.conns++
	if k.Wide != "" {
		l.wide[k.Wide]++
	}
	return true
}

func (l *addrLimits) closeConn(k clientaddr.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.addrs[k.Narrow]; ok && st.conns > 0 {
		st.conns--
	}
	if k.Wide != "" {
		if l.wide[k.Wide] <= 1 {
			delete(l.wide, k.Wide)
		} else {
			l.wide[k.Wide]--
		}
	}
}

func (l *addrLimits) allowEvent(k clientaddr.Key) bool {
	if l.cfg.IPEventsPerSecond <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state(k.Narrow).bucket.Allow()
}

// allowInvalid counts n invalid messages from k and reports whether k is
// within its allowance.
func (l *addrLimits) allowInvalid(k clientaddr.Key, now time.Time, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(k.Narrow)
	if st.invalid == nil {
		st.invalid = rate.NewLimiter(ipInvalidPerSecond, ipInvalidBurst)
	}
	return st.invalid.AllowN(now, n)
}

// openNeg counts a NIP-77 session from k unless k is at its cap.
func (l *addrLimits) openNeg(k clientaddr.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(k.Narrow)
	if st.negs >= l.cfg.IPMaxNegSessions {
		return false
	}
	st.negs++
	return true
}

func (l *addrLimits) closeNeg(k clientaddr.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.addrs[k.Narrow]; ok && st.negs > 0 {
		st.negs--
	}
}

// reserveWork says how long k must wait before its next query (0: now),
// and when it need not wait, reserves w from k's budget and says what it
// reserved (workbudget.Budget.Reserve).
func (l *addrLimits) reserveWork(k clientaddr.Key, w workbudget.Work) (workbudget.Work, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := &l.state(k.Narrow).work
	now := time.Now()
	r, ok := b.Reserve(now, w)
	if !ok {
		return r, b.Wait(now)
	}
	return r, 0
}

// settleWork charges k used in place of what it reserved.
func (l *addrLimits) settleWork(k clientaddr.Key, reserved, used workbudget.Work) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state(k.Narrow).work.Settle(time.Now(), reserved, used)
}

// openSub counts a REQ subscription from k unless k is at its cap.
func (l *addrLimits) openSub(k clientaddr.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(k.Narrow)
	if st.subs >= l.cfg.IPMaxSubscriptions {
		return false
	}
	st.subs++
	return true
}

func (l *addrLimits) closeSub(k clientaddr.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.addrs[k.Narrow]; ok && st.subs > 0 {
		st.subs--
	}
}
