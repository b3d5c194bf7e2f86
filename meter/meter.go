// Package meter counts, per counterparty and per accounting window, what
// this node gave each peer and received from it, for every metered service
// (spec/receipts.md "Counts"). The services call Record at the point where
// the service happens (sync fetch and push in meshsync, gossip forwarding
// through GossipTracer, mediation and pickup in didcomm/agent); package
// accounting rolls the window at each UTC-aligned boundary and turns the
// closed window's tallies into receipts.
//
// Counting is on the hot path, so Record is a map lookup and an atomic add
// (docs/benchmarks.md "Metering"), and a nil *Meter records nothing, so a
// service without accounting pays one comparison.
//
// It is not the exchange of counts or the receipts (package accounting,
// package receipt), and it keeps nothing on disk: a window still open when
// the node dies is lost, and the pair's next exchange disputes it.
package meter

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/receipt"
)

// Service is a metered service.
type Service uint8

// The metered services, in the order of receipt.Counts.
const (
	Events Service = iota
	Bytes
	StorageBytes
	CircuitSeconds
	CircuitBytes
	MediationMessages
	ComputeUnits
	numServices
)

var serviceNames = [numServices]string{"events", "bytes", "storage_bytes", "circuit_seconds", "circuit_bytes", "mediation_messages", "compute_units"}

// String is the service's name, as in receipts and grants.
func (s Service) String() string {
	if s < numServices {
		return serviceNames[s]
	}
	return "unknown"
}

// ParseService returns the service with that name.
func ParseService(name string) (Service, bool) {
	for i, n := range serviceNames {
		if n == name {
			return Service(i), true
		}
	}
	return 0, false
}

// UnmarshalText reads a service by its name ("events"), as config.toml's
// accounting.require_grant lists them.
func (s *Service) UnmarshalText(b []byte) error {
	v, ok := ParseService(string(b))
	if !ok {
		return fmt.Errorf("unknown service %q (%s)", b, strings.Join(serviceNames[:], ", "))
	}
	*s = v
	return nil
}

// MarshalText writes the service's name.
func (s Service) MarshalText() ([]byte, error) {
	if s >= numServices {
		return nil, fmt.Errorf("meter: no service %d", s)
	}
	return []byte(serviceNames[s]), nil
}

// Names lists every service's name.
func Names() []string { return append([]string(nil), serviceNames[:]...) }

// Direction says which way a service went.
type Direction uint8

// Gave is service this node gave the peer; Received is service the peer
// gave this node.
const (
	Gave Direction = iota
	Received
)

// Tally is one peer's counts in one window: Gave then Received, by
// service.
type Tally [2 * numServices]atomic.Uint64

// Side returns the tally as a receipt's figures.
func (t *Tally) Side() receipt.Side {
	c := func(d Direction) receipt.Counts {
		v := func(s Service) uint64 { return t[int(d)*int(numServices)+int(s)].Load() }
		return receipt.Counts{Events: v(Events), Bytes: v(Bytes), StorageBytes: v(StorageBytes),
			CircuitSeconds: v(CircuitSeconds), CircuitBytes: v(CircuitBytes),
			MediationMessages: v(MediationMessages), ComputeUnits: v(ComputeUnits)}
	}
	return receipt.Side{Gave: c(Gave), Received: c(Received)}
}

// Window is the tallies of one window.
type Window struct {
	// Start is the window's start (Unix seconds).
	Start int64
	peers sync.Map // peer.ID → *Tally
}

func (w *Window) tally(p peer.ID) *Tally {
	if t, ok := w.peers.Load(p); ok {
		return t.(*Tally)
	}
	t, _ := w.peers.LoadOrStore(p, new(Tally))
	return t.(*Tally)
}

// Sides returns every peer's figures in the window, leaving out peers
// with none.
func (w *Window) Sides() map[peer.ID]receipt.Side {
	out := map[peer.ID]receipt.Side{}
	w.peers.Range(func(k, v any) bool {
		s := v.(*Tally).Side()
		if !s.Gave.IsZero() || !s.Received.IsZero() {
			out[k.(peer.ID)] = s
		}
		return true
	})
	return out
}

// Meter counts per peer per window. Its methods are safe for concurrent
// use; a nil *Meter counts nothing.
type Meter struct {
	self   peer.ID
	length int64
	cur    atomic.Pointer[Window]
}

// New returns a meter for windows of length (whole seconds, at least one)
// that ignores service to or from self.
func New(self peer.ID, length time.Duration, now time.Time) *Meter {
	m := &Meter{self: self, length: max(int64(length/time.Second), 1)}
	m.cur.Store(&Window{Start: m.Align(now)})
	return m
}

// Length is the window length in seconds.
func (m *Meter) Length() int64 { return m.length }

// Align returns the start of the window t falls in.
func (m *Meter) Align(t time.Time) int64 {
	s := t.Unix()
	return s - s%m.length
}

// Record counts n units of service s with peer p in the current window.
func (m *Meter) Record(p peer.ID, s Service, d Direction, n uint64) {
	if m == nil || n == 0 || p == m.self || p == "" {
		return
	}
	m.cur.Load().tally(p)[int(d)*int(numServices)+int(s)].Add(n)
}

// Used returns what this node gave p of s in the current window, for
// enforcing grants.
func (m *Meter) Used(p peer.ID, s Service) uint64 {
	if m == nil {
		return 0
	}
	t, ok := m.cur.Load().peers.Load(p)
	if !ok {
		return 0
	}
	return t.(*Tally)[int(Gave)*int(numServices)+int(s)].Load()
}

// Current returns the open window.
func (m *Meter) Current() *Window { return m.cur.Load() }

// Roll starts the window that begins at start, if it is later than the
// open one, and returns the window it closed (nil if none). A Record that
// loaded the old window just before the swap may still land in it, so the
// caller reads the closed window a moment later.
func (m *Meter) Roll(start int64) *Window {
	old := m.cur.Load()
	if start <= old.Start {
		return nil
	}
	if !m.cur.CompareAndSwap(old, &Window{Start: start}) {
		return nil
	}
	return old
}
