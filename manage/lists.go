package manage

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound the lists, so a leaked admin key cannot fill the disk or
// the memory the checks run from.
type Limits struct {
	// MaxEntries bounds each list (pubkeys, events, kinds, addresses).
	MaxEntries int
	// MaxReasonBytes bounds an operator's reason or a relay name,
	// description or icon URL.
	MaxReasonBytes int
}

// DefaultLimits are the lists' bounds unless configured otherwise.
func DefaultLimits() Limits { return Limits{MaxEntries: 100_000, MaxReasonBytes: 1024} }

// DefaultPoll is how often Lists reads a shared store's version when no
// notification has come (ListOptions.Poll).
const DefaultPoll = time.Second

// DefaultPollListening is ListOptions.PollListening's default.
const DefaultPollListening = 15 * time.Second

// ErrFull is a change refused because its list is at Limits.MaxEntries.
var ErrFull = errors.New("list is full")

// Entry is one list entry with the operator's reason.
type Entry struct {
	Key    string
	Reason string
}

// ListOptions configure Lists.
type ListOptions struct {
	Limits Limits
	// Poll is how often the lists read a shared store's version when no
	// notification has woken them (default DefaultPoll): the longest a
	// lost notification delays a change made by another process.
	Poll time.Duration
	// PollListening is Poll while the store says its notifications are
	// reliable (Notifier; default DefaultPollListening, never shorter
	// than Poll): then the poll only bounds the delay of a change written
	// around the store, by hand, and it is most of what an idle
	// front-end spends.
	PollListening time.Duration
	// SetInfo is told the NIP-11 name, description and icon once at start
	// and whenever one changes, here or in another process sharing the
	// store.
	SetInfo func(name, description, icon string)
	// CloseClients closes the open connections of clients inside a newly
	// blocked prefix, returning how many; called in every process that
	// sees the block, each for its own clients.
	CloseClients func(p netip.Prefix) int
	// Log receives the watcher's warnings (default: discard).
	Log *slog.Logger
}

// snapshot is what the relay's hooks read, swapped whole on every change,
// so a check on the event path takes no lock and reaches no database.
type snapshot struct {
	bannedPubkeys  map[[32]byte]string
	allowedPubkeys map[[32]byte]struct{}
	bannedEvents   map[[32]byte]string
	// queued are the events allowed or held for moderation: Hold leaves
	// them, and banned ones, as they are without asking the store.
	queued        map[[32]byte]struct{}
	allowedKinds  map[int]struct{}
	disallowKinds map[int]struct{}
	blocked       []blockedPrefix
	info          [3]string // name, description, icon
}

type blockedPrefix struct {
	p      netip.Prefix
	reason string
}

// infoFields are the info list's keys, in snapshot.info's order.
var infoFields = [3]string{"name", "description", "icon"}

// Lists are the operator's bans and allows: kept in a ListStore, checked
// from an in-memory view of it. A store that other processes change too
// (Changed not nil) is watched: its version is read on every notification
// and every Poll, and the view rebuilt when it moved, so a change made
// through another front-end holds here within Poll at worst.
type Lists struct {
	st  ListStore
	lim Limits
	o   ListOptions

	mu      sync.Mutex // serialises view rebuilds and their effects
	version uint64     // the store's version the view was loaded at
	cur     atomic.Pointer[snapshot]

	cancel context.CancelFunc
	done   chan struct{}
}

// New loads the lists from st and, if other processes may change st,
// starts watching it until Close.
func New(ctx context.Context, st ListStore, o ListOptions) (*Lists, error) {
	d := DefaultLimits()
	if o.Limits.MaxEntries <= 0 {
		o.Limits.MaxEntries = d.MaxEntries
	}
	if o.Limits.MaxReasonBytes <= 0 {
		o.Limits.MaxReasonBytes = d.MaxReasonBytes
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.PollListening <= 0 {
		o.PollListening = DefaultPollListening
	}
	o.PollListening = max(o.PollListening, o.Poll)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	l := &Lists{st: st, lim: o.Limits, o: o, done: make(chan struct{})}
	l.mu.Lock()
	err := l.reload(ctx)
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if st.Changed() == nil {
		close(l.done)
		return l, nil
	}
	go l.watch(wctx)
	return l, nil
}

// Close stops watching the store. The store's owner closes it.
func (l *Lists) Close() error {
	l.cancel()
	<-l.done
	return nil
}

// watchRetry is the first wait before the watcher reads a store again
// after a failed read; it doubles up to Poll.
const watchRetry = 50 * time.Millisecond

// watch rebuilds the view whenever the store's version moves: woken by
// the store's notification, and every Poll whatever it hears. A failed
// read (a dropped connection) is tried again soon, backing off to Poll.
func (l *Lists) watch(ctx context.Context) {
	defer close(l.done)
	poll := time.NewTimer(l.o.Poll)
	defer poll.Stop()
	retry := watchRetry
	for {
		wake := l.st.Changed() // before reading, so no change slips between
		if err := l.refresh(ctx); err != nil && ctx.Err() == nil {
			l.o.Log.Warn("manage: reading the lists; will try again", "err", err, "in", retry)
			poll.Reset(retry)
			retry = min(2*retry, l.o.Poll)
		} else {
			poll.Reset(l.pollEvery())
			retry = watchRetry
		}
		select {
		case <-wake:
		case <-poll.C:
		case <-ctx.Done():
			return
		}
	}
}

// pollEvery is how long the watcher waits for a notification before it
// reads the version anyway.
func (l *Lists) pollEvery() time.Duration {
	if n, ok := l.st.(Notifier); ok && n.Listening() {
		return l.o.PollListening
	}
	return l.o.Poll
}

// refresh rebuilds the view if the store has changed since it was loaded.
func (l *Lists) refresh(ctx context.Context) error {
	v, err := l.st.Version(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v == l.version {
		return nil
	}
	return l.reload(ctx)
}

// reload rebuilds the view from the store and applies what changed: a
// new NIP-11 field is shown, a newly blocked prefix's clients are closed
// (after the new view refuses their reconnections). l.mu is held.
func (l *Lists) reload(ctx context.Context) error {
	s := &snapshot{
		bannedPubkeys:  map[[32]byte]string{},
		allowedPubkeys: map[[32]byte]struct{}{},
		bannedEvents:   map[[32]byte]string{},
		queued:         map[[32]byte]struct{}{},
		allowedKinds:   map[int]struct{}{},
		disallowKinds:  map[int]struct{}{},
	}
	hexKey := func(list string, k []byte) ([32]byte, error) {
		var id [32]byte
		if _, err := hex.Decode(id[:], k); err != nil || len(k) != 64 {
			return id, fmt.Errorf("manage: bad key %q in %s", k, list)
		}
		return id, nil
	}
	kind := func(list string, k []byte) (int, error) {
		if len(k) != 8 {
			return 0, fmt.Errorf("manage: bad kind key in %s", list)
		}
		return int(binary.BigEndian.Uint64(k)), nil
	}
	v, err := l.st.Load(ctx, func(list string, k, v []byte) error {
		switch list {
		case ListBannedPubkeys, ListAllowedPubkeys, ListBannedEvents, ListAllowedEvents, ListHeldEvents:
			id, err := hexKey(list, k)
			if err != nil {
				return err
			}
			switch list {
			case ListBannedPubkeys:
				s.bannedPubkeys[id] = string(v)
			case ListAllowedPubkeys:
				s.allowedPubkeys[id] = struct{}{}
			case ListBannedEvents:
				s.bannedEvents[id] = string(v)
			default:
				s.queued[id] = struct{}{}
			}
		case ListAllowedKinds, ListDisallowKinds:
			n, err := kind(list, k)
			if err != nil {
				return err
			}
			if list == ListAllowedKinds {
				s.allowedKinds[n] = struct{}{}
			} else {
				s.disallowKinds[n] = struct{}{}
			}
		case ListBlockedIPs:
			p, err := netip.ParsePrefix(string(k))
			if err != nil {
				return fmt.Errorf("manage: bad address %q: %w", k, err)
			}
			s.blocked = append(s.blocked, blockedPrefix{p, string(v)})
		case ListInfo:
			for i, f := range infoFields {
				if string(k) == f {
					s.info[i] = string(v)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	old := l.cur.Load()
	l.cur.Store(s)
	l.version = v
	if l.o.SetInfo != nil && (old == nil || old.info != s.info) {
		l.o.SetInfo(s.info[0], s.info[1], s.info[2])
	}
	if l.o.CloseClients != nil && old != nil {
		had := map[netip.Prefix]bool{}
		for _, b := range old.blocked {
			had[b.p] = true
		}
		for _, b := range s.blocked {
			if !had[b.p] {
				l.o.CloseClients(b.p)
			}
		}
	}
	return nil
}

// put adds key to list (removing it from each of others) and rebuilds
// the view; it returns the values taken out of others.
func (l *Lists) put(ctx context.Context, list string, key []byte, value string, others ...string) ([][]byte, error) {
	cleared, err := l.st.Put(ctx, list, key, []byte(value), l.lim.MaxEntries, others...)
	if err != nil {
		return nil, err
	}
	return cleared, l.rebuild(ctx)
}

func (l *Lists) del(ctx context.Context, list string, key []byte) (bool, error) {
	found, err := l.st.Delete(ctx, list, key)
	if err != nil {
		return false, err
	}
	return found, l.rebuild(ctx)
}

// rebuild reloads the view after a change made here, so the caller's
// next check sees it.
func (l *Lists) rebuild(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reload(ctx)
}

func (l *Lists) list(ctx context.Context, list string) ([]Entry, error) {
	var out []Entry
	err := l.st.Entries(ctx, list, func(k, v []byte) error {
		out = append(out, Entry{Key: string(k), Reason: string(v)})
		return nil
	})
	return out, err
}

func (l *Lists) reason(r string) (string, error) {
	if len(r) > l.lim.MaxReasonBytes {
		return "", fmt.Errorf("reason of %d bytes is over the limit of %d", len(r), l.lim.MaxReasonBytes)
	}
	return r, nil
}

// ParseHex32 parses a pubkey or event id written as 64 hex characters.
func ParseHex32(s string) ([32]byte, error) {
	var b [32]byte
	if len(s) != 64 {
		return b, fmt.Errorf("%q is not 64 hex characters (a pubkey or event id in hex; npub and note are not taken here)", s)
	}
	if _, err := hex.Decode(b[:], []byte(strings.ToLower(s))); err != nil {
		return b, fmt.Errorf("%q is not hex", s)
	}
	return b, nil
}

func hexKey(b [32]byte) []byte { return []byte(hex.EncodeToString(b[:])) }

func kindKey(k int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(k)) }

// BanPubkey bans an author: their events are refused from now on.
func (l *Lists) BanPubkey(ctx context.Context, pk [32]byte, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	_, err = l.put(ctx, ListBannedPubkeys, hexKey(pk), r, ListAllowedPubkeys)
	return err
}

// UnbanPubkey lifts a ban; it reports whether there was one.
func (l *Lists) UnbanPubkey(ctx context.Context, pk [32]byte) (bool, error) {
	return l.del(ctx, ListBannedPubkeys, hexKey(pk))
}

// AllowPubkey adds an author to the allowed list (and lifts a ban).
func (l *Lists) AllowPubkey(ctx context.Context, pk [32]byte, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	_, err = l.put(ctx, ListAllowedPubkeys, hexKey(pk), r, ListBannedPubkeys)
	return err
}

// UnallowPubkey removes an author from the allowed list.
func (l *Lists) UnallowPubkey(ctx context.Context, pk [32]byte) (bool, error) {
	return l.del(ctx, ListAllowedPubkeys, hexKey(pk))
}

// BanEvent bans an event id: it is refused if offered again. The caller
// removes it from the store.
func (l *Lists) BanEvent(ctx context.Context, id [32]byte, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	_, err = l.put(ctx, ListBannedEvents, hexKey(id), r, ListAllowedEvents, ListHeldEvents)
	return err
}

// UnbanEvent lifts an event's ban.
func (l *Lists) UnbanEvent(ctx context.Context, id [32]byte) (bool, error) {
	return l.del(ctx, ListBannedEvents, hexKey(id))
}

// AllowEvent marks an event allowed: it lifts a ban and releases it from
// the moderation queue, whose held copy it returns (nil if none).
func (l *Lists) AllowEvent(ctx context.Context, id [32]byte, reason string) (held []byte, err error) {
	r, err := l.reason(reason)
	if err != nil {
		return nil, err
	}
	cleared, err := l.put(ctx, ListAllowedEvents, hexKey(id), r, ListBannedEvents, ListHeldEvents)
	if err != nil {
		return nil, err
	}
	return cleared[1], nil
}

// heldEvent is a held event and why it was held, as the moderation queue
// keeps it.
type heldEvent struct {
	Event  json.RawMessage `json:"event"`
	Reason string          `json:"reason"`
}

// Hold puts an event in the moderation queue (NIP-86
// listeventsneedingmoderation) with why it was held; allowevent releases
// it, banevent drops it. evJSON is the event's JSON. A policy that holds
// events for review calls it, as often as the event arrives: an event
// already queued, allowed or banned is left as it is, without a write
// (and, when this view knows of it, without asking the store).
func (l *Lists) Hold(ctx context.Context, id [32]byte, evJSON []byte, reason string) error {
	s := l.cur.Load()
	if _, ok := s.queued[id]; ok {
		return nil
	}
	if _, ok := s.bannedEvents[id]; ok {
		return nil
	}
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	v, err := json.Marshal(heldEvent{Event: evJSON, Reason: r})
	if err != nil {
		return err
	}
	added, err := l.st.PutNew(ctx, ListHeldEvents, hexKey(id), v, l.lim.MaxEntries, ListHeldEvents, ListAllowedEvents, ListBannedEvents)
	if err != nil || !added {
		return err
	}
	return l.rebuild(ctx)
}

// Held lists the events needing moderation, with their reasons.
func (l *Lists) Held(ctx context.Context) ([]Entry, error) {
	es, err := l.list(ctx, ListHeldEvents)
	for i := range es {
		var h heldEvent
		if json.Unmarshal([]byte(es[i].Reason), &h) == nil {
			es[i].Reason = h.Reason
		}
	}
	return es, err
}

// AllowKind adds a kind to the allowed kinds (and lifts its disallowing).
func (l *Lists) AllowKind(ctx context.Context, k int) error {
	_, err := l.put(ctx, ListAllowedKinds, kindKey(k), "", ListDisallowKinds)
	return err
}

// DisallowKind removes a kind from the allowed kinds and refuses it.
func (l *Lists) DisallowKind(ctx context.Context, k int) error {
	_, err := l.put(ctx, ListDisallowKinds, kindKey(k), "", ListAllowedKinds)
	return err
}

func (l *Lists) kinds(ctx context.Context, list string) ([]int, error) {
	var out []int
	err := l.st.Entries(ctx, list, func(k, _ []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("manage: bad kind key in %s", list)
		}
		out = append(out, int(binary.BigEndian.Uint64(k)))
		return nil
	})
	return out, err
}

// ParseAddr parses an address or a CIDR prefix to block.
func ParseAddr(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// BlockIP blocks an address or prefix; the open connections inside it
// are closed (ListOptions.CloseClients).
func (l *Lists) BlockIP(ctx context.Context, p netip.Prefix, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	_, err = l.put(ctx, ListBlockedIPs, []byte(p.String()), r)
	return err
}

// UnblockIP lifts a block.
func (l *Lists) UnblockIP(ctx context.Context, p netip.Prefix) (bool, error) {
	return l.del(ctx, ListBlockedIPs, []byte(p.String()))
}

// SetInfo sets one of "name", "description" or "icon"; every process
// sharing the store shows it (ListOptions.SetInfo).
func (l *Lists) SetInfo(ctx context.Context, field, value string) error {
	if _, err := l.reason(value); err != nil {
		return err
	}
	_, err := l.put(ctx, ListInfo, []byte(field), value)
	return err
}

// PubkeyRefusal says why an author's event is refused by the lists, or "".
// Allowed pubkeys are checked only for the node's own clients (client
// true).
func (l *Lists) PubkeyRefusal(pk [32]byte, client bool) string {
	s := l.cur.Load()
	if r, ok := s.bannedPubkeys[pk]; ok {
		return withReason("blocked: this author is banned by the relay's operator", r)
	}
	if client && len(s.allowedPubkeys) > 0 {
		if _, ok := s.allowedPubkeys[pk]; !ok {
			return "blocked: this relay takes events only from the authors its operator allows"
		}
	}
	return ""
}

// EventRefusal says why an event id is refused, or "".
func (l *Lists) EventRefusal(id [32]byte) string {
	if r, ok := l.cur.Load().bannedEvents[id]; ok {
		return withReason("blocked: this event is banned by the relay's operator", r)
	}
	return ""
}

// KindRefusal says why a kind is refused to the node's clients, or "".
func (l *Lists) KindRefusal(k int) string {
	s := l.cur.Load()
	if _, ok := s.disallowKinds[k]; ok {
		return "blocked: kind " + strconv.Itoa(k) + " is not accepted by this relay's operator"
	}
	if len(s.allowedKinds) > 0 {
		if _, ok := s.allowedKinds[k]; !ok {
			return "blocked: this relay takes only the kinds its operator allows; kind " + strconv.Itoa(k) + " is not one"
		}
	}
	return ""
}

// AddrRefusal says why a client address is refused, or "".
func (l *Lists) AddrRefusal(a netip.Addr) string {
	a = a.Unmap()
	for _, b := range l.cur.Load().blocked {
		if b.p.Contains(a) {
			return withReason("blocked: this address is blocked by the relay's operator", b.reason)
		}
	}
	return ""
}

func withReason(msg, reason string) string {
	if reason == "" {
		return msg
	}
	return msg + ": " + reason
}
