package manage

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/internal/boltsnap"
)

// FileName is the lists' database in the node's home.
const FileName = "manage.db"

// The lists' buckets. Keys: a pubkey or event id as 64 hex characters, a
// kind as 8 bytes big-endian, an address or prefix as its text; values:
// the reason the operator gave (JSON for events needing moderation).
var (
	bucketBannedPubkeys  = []byte("banned_pubkeys")
	bucketAllowedPubkeys = []byte("allowed_pubkeys")
	bucketBannedEvents   = []byte("banned_events")
	bucketAllowedEvents  = []byte("allowed_events")
	bucketHeldEvents     = []byte("held_events")
	bucketAllowedKinds   = []byte("allowed_kinds")
	bucketDisallowKinds  = []byte("disallowed_kinds")
	bucketBlockedIPs     = []byte("blocked_ips")
	bucketInfo           = []byte("info")
	allBuckets           = [][]byte{bucketBannedPubkeys, bucketAllowedPubkeys, bucketBannedEvents, bucketAllowedEvents,
		bucketHeldEvents, bucketAllowedKinds, bucketDisallowKinds, bucketBlockedIPs, bucketInfo}
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

// ErrFull is a change refused because its list is at Limits.MaxEntries.
var ErrFull = errors.New("list is full")

// Entry is one list entry with the operator's reason.
type Entry struct {
	Key    string
	Reason string
}

// snapshot is what the relay's hooks read, swapped whole on every change,
// so a check on the event path takes no lock.
type snapshot struct {
	bannedPubkeys  map[[32]byte]string
	allowedPubkeys map[[32]byte]struct{}
	bannedEvents   map[[32]byte]string
	allowedKinds   map[int]struct{}
	disallowKinds  map[int]struct{}
	blocked        []blockedPrefix
}

type blockedPrefix struct {
	p      netip.Prefix
	reason string
}

// Lists are the operator's bans and allows, durable in manage.db.
type Lists struct {
	db  *bolt.DB
	lim Limits
	mu  sync.Mutex // serialises changes and snapshot rebuilds
	cur atomic.Pointer[snapshot]
}

// Open opens (creating) the lists in dir.
func Open(dir string, lim Limits) (*Lists, error) {
	if lim.MaxEntries <= 0 || lim.MaxReasonBytes <= 0 {
		d := DefaultLimits()
		if lim.MaxEntries <= 0 {
			lim.MaxEntries = d.MaxEntries
		}
		if lim.MaxReasonBytes <= 0 {
			lim.MaxReasonBytes = d.MaxReasonBytes
		}
	}
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("manage: open %s: %w", filepath.Join(dir, FileName), err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("manage: %w", err)
	}
	l := &Lists{db: db, lim: lim}
	if err := l.reload(); err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// Close closes the database.
func (l *Lists) Close() error { return l.db.Close() }

// reload rebuilds the snapshot from the database. l.mu is held or the
// Lists is not yet shared.
func (l *Lists) reload() error {
	s := &snapshot{
		bannedPubkeys:  map[[32]byte]string{},
		allowedPubkeys: map[[32]byte]struct{}{},
		bannedEvents:   map[[32]byte]string{},
		allowedKinds:   map[int]struct{}{},
		disallowKinds:  map[int]struct{}{},
	}
	err := l.db.View(func(tx *bolt.Tx) error {
		hexKeys := func(b []byte, fn func(k [32]byte, v string)) error {
			return tx.Bucket(b).ForEach(func(k, v []byte) error {
				var id [32]byte
				if _, err := hex.Decode(id[:], k); err != nil || len(k) != 64 {
					return fmt.Errorf("manage: bad key %q in %s", k, b)
				}
				fn(id, string(v))
				return nil
			})
		}
		if err := hexKeys(bucketBannedPubkeys, func(k [32]byte, v string) { s.bannedPubkeys[k] = v }); err != nil {
			return err
		}
		if err := hexKeys(bucketAllowedPubkeys, func(k [32]byte, _ string) { s.allowedPubkeys[k] = struct{}{} }); err != nil {
			return err
		}
		if err := hexKeys(bucketBannedEvents, func(k [32]byte, v string) { s.bannedEvents[k] = v }); err != nil {
			return err
		}
		kinds := func(b []byte, m map[int]struct{}) error {
			return tx.Bucket(b).ForEach(func(k, _ []byte) error {
				if len(k) != 8 {
					return fmt.Errorf("manage: bad kind key in %s", b)
				}
				m[int(binary.BigEndian.Uint64(k))] = struct{}{}
				return nil
			})
		}
		if err := kinds(bucketAllowedKinds, s.allowedKinds); err != nil {
			return err
		}
		if err := kinds(bucketDisallowKinds, s.disallowKinds); err != nil {
			return err
		}
		return tx.Bucket(bucketBlockedIPs).ForEach(func(k, v []byte) error {
			p, err := netip.ParsePrefix(string(k))
			if err != nil {
				return fmt.Errorf("manage: bad address %q: %w", k, err)
			}
			s.blocked = append(s.blocked, blockedPrefix{p, string(v)})
			return nil
		})
	})
	if err != nil {
		return err
	}
	l.cur.Store(s)
	return nil
}

// change runs fn in a write transaction and rebuilds the snapshot.
func (l *Lists) change(fn func(tx *bolt.Tx) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.db.Update(fn); err != nil {
		return err
	}
	return l.reload()
}

func (l *Lists) reason(r string) (string, error) {
	if len(r) > l.lim.MaxReasonBytes {
		return "", fmt.Errorf("reason of %d bytes is over the limit of %d", len(r), l.lim.MaxReasonBytes)
	}
	return r, nil
}

// put adds key to bucket b (and removes it from each of the others).
func (l *Lists) put(b []byte, key []byte, value string, others ...[]byte) error {
	return l.change(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b)
		if bk.Get(key) == nil && bk.Stats().KeyN >= l.lim.MaxEntries {
			return fmt.Errorf("%w: %s holds %d entries, the limit (max_entries); remove some first", ErrFull, b, l.lim.MaxEntries)
		}
		for _, o := range others {
			if err := tx.Bucket(o).Delete(key); err != nil {
				return err
			}
		}
		return bk.Put(key, []byte(value))
	})
}

func (l *Lists) del(b []byte, key []byte) (bool, error) {
	found := false
	err := l.change(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b)
		found = bk.Get(key) != nil
		return bk.Delete(key)
	})
	return found, err
}

func (l *Lists) list(b []byte) ([]Entry, error) {
	var out []Entry
	err := l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(b).ForEach(func(k, v []byte) error {
			out = append(out, Entry{Key: string(k), Reason: string(v)})
			return nil
		})
	})
	return out, err
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
func (l *Lists) BanPubkey(pk [32]byte, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	return l.put(bucketBannedPubkeys, hexKey(pk), r, bucketAllowedPubkeys)
}

// UnbanPubkey lifts a ban; it reports whether there was one.
func (l *Lists) UnbanPubkey(pk [32]byte) (bool, error) { return l.del(bucketBannedPubkeys, hexKey(pk)) }

// AllowPubkey adds an author to the allowed list (and lifts a ban).
func (l *Lists) AllowPubkey(pk [32]byte, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	return l.put(bucketAllowedPubkeys, hexKey(pk), r, bucketBannedPubkeys)
}

// UnallowPubkey removes an author from the allowed list.
func (l *Lists) UnallowPubkey(pk [32]byte) (bool, error) {
	return l.del(bucketAllowedPubkeys, hexKey(pk))
}

// BanEvent bans an event id: it is refused if offered again. The caller
// removes it from the store.
func (l *Lists) BanEvent(id [32]byte, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	return l.put(bucketBannedEvents, hexKey(id), r, bucketAllowedEvents, bucketHeldEvents)
}

// UnbanEvent lifts an event's ban.
func (l *Lists) UnbanEvent(id [32]byte) (bool, error) { return l.del(bucketBannedEvents, hexKey(id)) }

// AllowEvent marks an event allowed: it lifts a ban and releases it from
// the moderation queue, whose held copy it returns (nil if none).
func (l *Lists) AllowEvent(id [32]byte, reason string) (held []byte, err error) {
	r, err := l.reason(reason)
	if err != nil {
		return nil, err
	}
	k := hexKey(id)
	err = l.change(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketHeldEvents).Get(k); v != nil {
			held = slices.Clone(v)
		}
		bk := tx.Bucket(bucketAllowedEvents)
		if bk.Get(k) == nil && bk.Stats().KeyN >= l.lim.MaxEntries {
			return fmt.Errorf("%w: allowed_events holds %d entries, the limit", ErrFull, l.lim.MaxEntries)
		}
		for _, b := range [][]byte{bucketBannedEvents, bucketHeldEvents} {
			if err := tx.Bucket(b).Delete(k); err != nil {
				return err
			}
		}
		return bk.Put(k, []byte(r))
	})
	return held, err
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
// already queued, allowed or banned is left as it is, without a write.
func (l *Lists) Hold(id [32]byte, evJSON []byte, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	v, err := json.Marshal(heldEvent{Event: evJSON, Reason: r})
	if err != nil {
		return err
	}
	k := hexKey(id)
	known := false
	l.db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketHeldEvents, bucketAllowedEvents, bucketBannedEvents} {
			known = known || tx.Bucket(b).Get(k) != nil
		}
		return nil
	})
	if known {
		return nil
	}
	return l.put(bucketHeldEvents, k, string(v))
}

// Held lists the events needing moderation, with their reasons.
func (l *Lists) Held() ([]Entry, error) {
	es, err := l.list(bucketHeldEvents)
	for i := range es {
		var h heldEvent
		if json.Unmarshal([]byte(es[i].Reason), &h) == nil {
			es[i].Reason = h.Reason
		}
	}
	return es, err
}

// AllowKind adds a kind to the allowed kinds (and lifts its disallowing).
func (l *Lists) AllowKind(k int) error {
	return l.put(bucketAllowedKinds, kindKey(k), "", bucketDisallowKinds)
}

// DisallowKind removes a kind from the allowed kinds and refuses it.
func (l *Lists) DisallowKind(k int) error {
	return l.put(bucketDisallowKinds, kindKey(k), "", bucketAllowedKinds)
}

func (l *Lists) kinds(b []byte) ([]int, error) {
	var out []int
	err := l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(b).ForEach(func(k, _ []byte) error {
			out = append(out, int(binary.BigEndian.Uint64(k)))
			return nil
		})
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

// BlockIP blocks an address or prefix.
func (l *Lists) BlockIP(p netip.Prefix, reason string) error {
	r, err := l.reason(reason)
	if err != nil {
		return err
	}
	return l.put(bucketBlockedIPs, []byte(p.String()), r)
}

// UnblockIP lifts a block.
func (l *Lists) UnblockIP(p netip.Prefix) (bool, error) {
	return l.del(bucketBlockedIPs, []byte(p.String()))
}

// Info is the NIP-11 name, description and icon the operator set.
func (l *Lists) Info() (name, description, icon string, err error) {
	err = l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketInfo)
		name, description, icon = string(b.Get([]byte("name"))), string(b.Get([]byte("description"))), string(b.Get([]byte("icon")))
		return nil
	})
	return
}

// SetInfo sets one of "name", "description" or "icon".
func (l *Lists) SetInfo(field, value string) error {
	if _, err := l.reason(value); err != nil {
		return err
	}
	return l.change(func(tx *bolt.Tx) error { return tx.Bucket(bucketInfo).Put([]byte(field), []byte(value)) })
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

// Snapshot writes a consistent copy of the lists' database for a backup
// of a running node (package boltsnap).
func (l *Lists) Snapshot(fn func(size int64, write func(w io.Writer) error) error) error {
	return boltsnap.Of(l.db)(fn)
}
