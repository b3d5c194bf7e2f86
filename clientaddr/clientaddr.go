// Package clientaddr names the party behind a remote network address, for
// limits that must be fair between parties rather than between addresses
// (spec/limits.md): an IPv4 address is one party, an IPv6 client is keyed
// by its /64 and, for a looser cap, its /56. It also keeps bounded tables
// of token buckets, keyed so or by any other name of a party (the mesh
// keys them by PeerID).
//
// Its keys are for the node's unauthenticated endpoints (the relay's
// WebSocket, /didcomm); mesh peers are named by their PeerID and bounded
// by the libp2p resource manager besides.
package clientaddr

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Key names the party behind a remote address. An IPv4 address is one
// party. An IPv6 host usually holds a whole /64 (SLAAC, privacy
// addresses) and a site often a /56, so one IPv6 client could otherwise
// take a fresh address for every connection: it is keyed by its /64
// (Narrow) and, for a looser second cap, its /56 (Wide).
type Key struct {
	Narrow string
	Wide   string // empty for IPv4
}

// Of returns the key of a "host:port" or bare host address. Something
// that is no IP address (a Unix socket, a test's fake address) is its own
// key.
func Of(remote string) Key {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return Key{Narrow: host}
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return Key{Narrow: ip.String()}
	}
	p64, _ := ip.Prefix(64)
	p56, _ := ip.Prefix(56)
	return Key{Narrow: p64.String(), Wide: p56.String()}
}

// Buckets is a bounded table of token buckets, one per key, each refilling
// at the same rate. It is safe for concurrent use.
type Buckets struct {
	rate  rate.Limit
	burst int
	max   int

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// NewBuckets returns a table whose buckets hold burst tokens and refill at
// perSecond, keeping at most maxKeys keys: when it is full, keys whose
// buckets are full (which forgets nothing) are dropped, and if none is,
// every key is (so that a flood of fresh keys costs bounded memory and
// at worst gives its senders a fresh burst).
func NewBuckets(perSecond float64, burst, maxKeys int) *Buckets {
	return &Buckets{rate: rate.Limit(perSecond), burst: burst, max: maxKeys, m: make(map[string]*rate.Limiter)}
}

// Allow takes a token from key's bucket; it returns false, and how long
// to wait for one, when there is none.
func (b *Buckets) Allow(key string) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.m[key]
	if !ok {
		if len(b.m) >= b.max {
			for k, l := range b.m {
				if l.Tokens() >= float64(b.burst) {
					delete(b.m, k)
				}
			}
			if len(b.m) >= b.max {
				clear(b.m)
			}
		}
		l = rate.NewLimiter(b.rate, b.burst)
		b.m[key] = l
	}
	if l.Allow() {
		return true, 0
	}
	return false, time.Duration(float64(time.Second) / float64(b.rate))
}
