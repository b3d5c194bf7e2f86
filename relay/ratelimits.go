package relay

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxTrackedIPs bounds the per-IP limiter table; idle entries are dropped
// first when it is full.
const maxTrackedIPs = 65536

// ipLimiter holds a token bucket and a connection count per remote IP.
type ipLimiter struct {
	perSec   float64
	burst    int
	maxConns int

	mu  sync.Mutex
	ips map[string]*ipState
}

type ipState struct {
	bucket *rate.Limiter
	conns  int
	seen   time.Time
}

func newIPLimiter(perSec float64, burst, maxConns int) *ipLimiter {
	return &ipLimiter{perSec: perSec, burst: burst, maxConns: maxConns, ips: make(map[string]*ipState)}
}

func (l *ipLimiter) state(ip string) *ipState {
	st, ok := l.ips[ip]
	if !ok {
		if len(l.ips) >= maxTrackedIPs {
			l.evict()
		}
		st = &ipState{}
		if l.perSec > 0 {
			st.bucket = rate.NewLimiter(rate.Limit(l.perSec), l.burst)
		}
		l.ips[ip] = st
	}
	st.seen = time.Now()
	return st
}

// evict drops entries with no open connection whose bucket has refilled,
// which forgets nothing a limit depends on.
func (l *ipLimiter) evict() {
	for ip, st := range l.ips {
		if st.conns == 0 && (st.bucket == nil || st.bucket.Tokens() >= float64(l.burst)) {
			delete(l.ips, ip)
		}
	}
}

func (l *ipLimiter) openConn(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(ip)
	if l.maxConns > 0 && st.conns >= l.maxConns {
		return false
	}
	st.conns++
	return true
}

func (l *ipLimiter) closeConn(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.ips[ip]; ok && st.conns > 0 {
		st.conns--
	}
}

func (l *ipLimiter) allowEvent(ip string) bool {
	if l.perSec <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state(ip).bucket.Allow()
}
