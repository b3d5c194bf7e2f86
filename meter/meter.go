// Package meter counts, per counterparty and per accounting window, what
// this node gave each peer and received from it, for every metered service
// (spec/receipts.md "Counts"). The services call it where the service
// happens: Event for each event moved (sync fetch, push and lookup in
// meshsync, gossip forwarding through GossipTracer), Record for other
// amounts (durable placement's storage bytes, relayed circuit bytes,
// mediation in didcomm/agent), RecordAt for an amount both sides count
// in the window of a time they agreed (a compute job's units), and Start
// and End around a service
// counted in seconds (a relayed circuit). Run rolls the window at each
// UTC-aligned boundary of the clock (package accounting runs it), a count
// made after a boundary nothing has rolled yet rolls it first, and
// accounting turns the closed windows' tallies into receipts; with each direction's events it keeps their
// evidence (a digest and a bounded sample of the event ids, spec/disputes.md)
// for a dispute.
//
// Counting is on the hot path, so Record is a map lookup and an atomic add
// and Event a few more atomic adds (docs/benchmarks/accounting.md), and a
// nil *Meter records nothing, so a service without accounting pays one
// comparison.
//
// It is not the exchange of counts or the receipts (package accounting,
// package receipt), nor where grants are enforced (the services ask
// package accounting before they serve), and it keeps nothing on disk: a
// window still open when the node dies is lost, and the pair's next
// exchange disputes it.
package meter

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
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
// service, with the evidence of the events counted each way.
type Tally struct {
	counts [2 * numServices]atomic.Uint64
	// digest, keyed and sample are each direction's evidence
	// (receipt.Evidence): the sum of the events' keys, how many were
	// keyed, and the smallest keys.
	digest [2]atomic.Uint64
	keyed  [2]atomic.Uint64
	sample [2]sketch
}

// Side returns the tally as a receipt's figures.
func (t *Tally) Side() receipt.Side {
	c := func(d Direction) receipt.Counts {
		v := func(s Service) uint64 { return t.counts[int(d)*int(numServices)+int(s)].Load() }
		return receipt.Counts{Events: v(Events), Bytes: v(Bytes), StorageBytes: v(StorageBytes),
			CircuitSeconds: v(CircuitSeconds), CircuitBytes: v(CircuitBytes),
			MediationMessages: v(MediationMessages), ComputeUnits: v(ComputeUnits)}
	}
	return receipt.Side{Gave: c(Gave), Received: c(Received)}
}

// Evidence returns the evidence of the events counted each way.
func (t *Tally) Evidence() receipt.Evidence {
	set := func(d Direction) receipt.EventSet {
		return receipt.EventSet{Events: t.keyed[d].Load(), Digest: receipt.Key(t.digest[d].Load()), Sample: t.sample[d].keys()}
	}
	return receipt.Evidence{Gave: set(Gave), Received: set(Received)}
}

// sketch keeps the smallest receipt.SampleSize distinct keys added to it
// (a bottom-k sketch). Adding a key at or above the bound, which is most
// keys once the sketch is full, is one atomic load.
type sketch struct {
	bound atomic.Uint64 // keys >= bound are not kept; 0 until first used
	mu    sync.Mutex
	kept  []uint64 // ascending
}

func (s *sketch) add(k uint64) {
	if b := s.bound.Load(); b != 0 && k >= b {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearch(s.kept, k)
	if found {
		return
	}
	if len(s.kept) == receipt.SampleSize {
		if i == len(s.kept) {
			return
		}
		s.kept = s.kept[:len(s.kept)-1]
	}
	s.kept = slices.Insert(s.kept, i, k)
	if len(s.kept) == receipt.SampleSize {
		s.bound.Store(s.kept[len(s.kept)-1])
	}
}

func (s *sketch) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.kept))
	for i, k := range s.kept {
		out[i] = receipt.Key(k)
	}
	return out
}

// EventKey returns an event's key (receipt.EventSet) from its JSON as
// fleetmesh writes it (nostr.Event.AppendJSON: the id first). Other
// layouts have no key: the event is counted but not in the evidence.
func EventKey(js []byte) (uint64, bool) {
	const prefix = `{"id":"`
	if len(js) < len(prefix)+16 || string(js[:len(prefix)]) != prefix {
		return 0, false
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], js[len(prefix):len(prefix)+16]); err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[:]), true
}

// Window is the tallies of one window.
type Window struct {
	// Start is the window's start (Unix seconds).
	Start int64
	peers sync.Map // peer.ID → *Tally

	// sealMu orders RecordAt's late counts before Seal: once sealed, a
	// closed window takes no more.
	sealMu sync.Mutex
	sealed bool
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

// Evidence returns p's evidence in the window.
func (w *Window) Evidence(p peer.ID) receipt.Evidence {
	if t, ok := w.peers.Load(p); ok {
		return t.(*Tally).Evidence()
	}
	return receipt.Evidence{Gave: receipt.EventSet{Digest: receipt.Key(0), Sample: []string{}}, Received: receipt.EventSet{Digest: receipt.Key(0), Sample: []string{}}}
}

// Meter counts per peer per window. Its methods are safe for concurrent
// use; a nil *Meter counts nothing.
type Meter struct {
	self   peer.ID
	length int64
	cur    atomic.Pointer[Window]
	spans  sync.Map // *Span → struct{}: the open spans
	now    func() time.Time

	closedMu sync.Mutex
	closed   []*Window // rolled, not yet taken (TakeClosed)

	unsealedMu sync.Mutex
	unsealed   []*Window // rolled, not yet sealed (RecordAt, Seal), oldest first
}

// maxUnsealed bounds the closed windows RecordAt may still count in when
// nothing seals them (a meter without accounting): the oldest is sealed
// as a newer one closes.
const maxUnsealed = 4

// New returns a meter for windows of length (whole seconds, at least one)
// that ignores service to or from self.
func New(self peer.ID, length time.Duration, now time.Time) *Meter {
	m := &Meter{self: self, length: max(int64(length/time.Second), 1), now: time.Now}
	m.cur.Store(&Window{Start: m.Align(now)})
	return m
}

// SetClock sets the clock the meter reads (time.Now unless set): a
// simulation, or a test that moves the windows itself with Roll, gives its
// own. Call it before the meter is used.
func (m *Meter) SetClock(now func() time.Time) { m.now = now }

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
	m.window().tally(p).counts[int(d)*int(numServices)+int(s)].Add(n)
}

// RecordAt counts n units of service s with p in the window that at falls
// in, if that window is the open one or a closed one not yet sealed, and
// in the open window otherwise (at in a sealed window, or after the open
// one began and before the clock rolled it). It returns the start of the
// window counted in.
//
// It is for a service two sides count at moments apart but agree a time
// for: a compute job's units, which the executor counts as it sends its
// result and the requester once it has judged it, each at the time the
// executor stamped (spec/compute.md "Accounting"). Counting both in the
// window of that time keeps an honest job out of a disputed window when a
// boundary falls between the two counts.
func (m *Meter) RecordAt(p peer.ID, s Service, d Direction, n uint64, at time.Time) int64 {
	if m == nil || n == 0 || p == m.self || p == "" {
		return 0
	}
	i := int(d)*int(numServices) + int(s)
	cur := m.window()
	if start := m.Align(at); start < cur.Start && m.countLate(start, p, i, n) {
		return start
	}
	cur.tally(p).counts[i].Add(n)
	return cur.Start
}

// countLate adds n to count i of p in the closed window that starts at
// start, if it is not sealed yet; it reports whether it did.
func (m *Meter) countLate(start int64, p peer.ID, i int, n uint64) bool {
	m.unsealedMu.Lock()
	defer m.unsealedMu.Unlock()
	for _, w := range m.unsealed {
		if w.Start != start {
			continue
		}
		w.sealMu.Lock()
		defer w.sealMu.Unlock()
		if w.sealed {
			return false
		}
		w.tally(p).counts[i].Add(n)
		return true
	}
	return false
}

// Seal ends RecordAt's counts in a closed window: the caller seals a
// window before it reads the window's figures for the last time.
func (m *Meter) Seal(w *Window) {
	w.sealMu.Lock()
	w.sealed = true
	w.sealMu.Unlock()
	m.unsealedMu.Lock()
	m.unsealed = slices.DeleteFunc(m.unsealed, func(x *Window) bool { return x == w })
	m.unsealedMu.Unlock()
}

// Event counts one event given to or received from p, whose JSON is js:
// one event, len(js) bytes, and the event's key in the evidence.
func (m *Meter) Event(p peer.ID, d Direction, js []byte) {
	if m == nil || p == m.self || p == "" {
		return
	}
	t := m.window().tally(p)
	t.counts[int(d)*int(numServices)+int(Events)].Add(1)
	t.counts[int(d)*int(numServices)+int(Bytes)].Add(uint64(len(js)))
	if k, ok := EventKey(js); ok {
		t.digest[d].Add(k)
		t.keyed[d].Add(1)
		t.sample[d].add(k)
	}
}

// Used returns what this node gave p of s in the current window, for
// enforcing grants.
func (m *Meter) Used(p peer.ID, s Service) uint64 {
	if m == nil {
		return 0
	}
	t, ok := m.window().peers.Load(p)
	if !ok {
		return 0
	}
	return t.(*Tally).counts[int(Gave)*int(numServices)+int(s)].Load()
}

// Current returns the open window.
func (m *Meter) Current() *Window { return m.cur.Load() }

// window returns the open window for a count, first rolling it if the
// clock has passed its end: a count lands in the window of the time it is
// made even when nothing has rolled the window yet (Run's timer late on a
// starved machine, or a node whose accounting loop had not started when
// the boundary passed). Without it, both ends of a pair could put the
// same transfer in different windows, or both in the one before, and the
// window the traffic was in would have no figures at either end.
func (m *Meter) window() *Window {
	w := m.cur.Load()
	if now := m.now(); now.Unix() >= w.Start+m.length {
		m.Roll(m.Align(now))
		return m.cur.Load()
	}
	return w
}

// Run rolls the window at each UTC-aligned boundary of the clock until ctx
// ends, so that what is counted falls in the window of the time it was
// counted at, at both ends of a pair, and not in whichever window was
// open when the accounting loop next came round.
func (m *Meter) Run(ctx context.Context) {
	// A window that ended before the loop started (a node started just
	// before a boundary) closes now, not at the next boundary.
	m.Roll(m.Align(m.now()))
	for {
		next := time.Unix(m.Align(m.now())+m.length, 0)
		t := time.NewTimer(next.Sub(m.now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		m.Roll(m.Align(m.now()))
	}
}

// TakeClosed returns the windows rolled since it was last called, oldest
// first.
func (m *Meter) TakeClosed() []*Window {
	m.closedMu.Lock()
	defer m.closedMu.Unlock()
	out := m.closed
	m.closed = nil
	return out
}

// Roll starts the window that begins at start, if it is later than the
// open one, and returns the window it closed (nil if none), which
// TakeClosed also returns. A Record that loaded the old window just
// before the swap may still land in it, so the caller reads the closed
// window a moment later.
func (m *Meter) Roll(start int64) *Window {
	old := m.cur.Load()
	if start <= old.Start {
		return nil
	}
	if !m.cur.CompareAndSwap(old, &Window{Start: start}) {
		return nil
	}
	m.spans.Range(func(k, _ any) bool {
		k.(*Span).split(old, start)
		return true
	})
	m.closedMu.Lock()
	m.closed = append(m.closed, old)
	m.closedMu.Unlock()
	m.unsealedMu.Lock()
	m.unsealed = append(m.unsealed, old)
	var drop *Window
	if len(m.unsealed) > maxUnsealed {
		drop = m.unsealed[0]
	}
	m.unsealedMu.Unlock()
	if drop != nil {
		m.Seal(drop)
	}
	return old
}

// Stop ends counting at a stop of the node: every open span ends,
// counting its whole seconds in the open window, and it returns the
// windows rolled and not yet taken (TakeClosed) and then the open one,
// whose figures so far the caller saves (spec/disputes.md "Stops"). What
// is counted after Stop lands in a window nobody reads.
func (m *Meter) Stop() []*Window {
	m.spans.Range(func(k, _ any) bool {
		k.(*Span).End()
		return true
	})
	return append(m.TakeClosed(), m.window())
}

// Span is a service counted in seconds while it lasts (a relayed
// circuit): each window gets the whole seconds of the span that fall in
// it, the fraction carried over, so a span's windows add up to its whole
// seconds. A nil *Span counts nothing.
type Span struct {
	m     *Meter
	p     peer.ID
	s     Service
	d     Direction
	mu    sync.Mutex
	from  int64 // Unix milliseconds counted up to
	ended bool
}

// Start opens a span of service s with peer p; End closes it.
func (m *Meter) Start(p peer.ID, s Service, d Direction) *Span {
	if m == nil || p == m.self || p == "" {
		return nil
	}
	sp := &Span{m: m, p: p, s: s, d: d, from: m.now().UnixMilli()}
	m.spans.Store(sp, struct{}{})
	return sp
}

// split counts the span's seconds up to the boundary at start (Unix
// seconds) into the window w that ends there.
func (sp *Span) split(w *Window, start int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.ended {
		return
	}
	if secs := (start*1000 - sp.from) / 1000; secs > 0 {
		w.tally(sp.p).counts[int(sp.d)*int(numServices)+int(sp.s)].Add(uint64(secs))
		sp.from += secs * 1000
	}
}

// End closes the span, counting its remaining whole seconds in the open
// window. Later calls do nothing.
func (sp *Span) End() {
	if sp == nil {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.ended {
		return
	}
	sp.ended = true
	sp.m.spans.Delete(sp)
	if secs := (sp.m.now().UnixMilli() - sp.from) / 1000; secs > 0 {
		sp.m.Record(sp.p, sp.s, sp.d, uint64(secs))
	}
}
