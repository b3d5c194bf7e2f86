package addrbook

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// FileName is the name of the address book file inside Config.Dir.
const FileName = "addrbook.json"

// Defaults used when a Config field is zero.
const (
	DefaultMaxPeers        = 1024
	DefaultMaxAddrsPerPeer = 16
	DefaultMaxFileBytes    = 4 << 20
)

// Config configures a Book.
type Config struct {
	// Dir is the directory that holds FileName. Empty keeps the book in
	// memory only (Save does nothing).
	Dir string
	// MaxPeers bounds the number of peers remembered.
	MaxPeers int
	// MaxAddrsPerPeer bounds the addresses remembered per peer; the ones
	// learnt most recently are kept.
	MaxAddrsPerPeer int
	// MaxFileBytes bounds the file read at Open, so a corrupt or hostile
	// file cannot make the node read gigabytes.
	MaxFileBytes int64
}

func (c *Config) setDefaults() {
	if c.MaxPeers <= 0 {
		c.MaxPeers = DefaultMaxPeers
	}
	if c.MaxAddrsPerPeer <= 0 {
		c.MaxAddrsPerPeer = DefaultMaxAddrsPerPeer
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
}

// Entry is what the book remembers about one peer.
type Entry struct {
	ID       peer.ID
	Addrs    []ma.Multiaddr
	LastSeen time.Time
}

// Book is a bounded, persisted address book. It is safe for concurrent use.
type Book struct {
	cfg Config

	mu      sync.Mutex
	entries map[peer.ID]*Entry
	dirty   bool
}

// Open returns the book stored in cfg.Dir, or an empty one if there is no
// file yet. A file that exists but cannot be decoded is an error: the
// operator should see it rather than have the node silently forget its
// peers.
func Open(cfg Config) (*Book, error) {
	cfg.setDefaults()
	b := &Book{cfg: cfg, entries: make(map[peer.ID]*Entry)}
	if cfg.Dir == "" {
		return b, nil
	}
	path := filepath.Join(cfg.Dir, FileName)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("addrbook: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("addrbook: %w", err)
	}
	if st.Size() > cfg.MaxFileBytes {
		return nil, fmt.Errorf("addrbook: %s is %d bytes, more than the %d allowed: %w", path, st.Size(), cfg.MaxFileBytes, ErrMalformed)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("addrbook: read %s: %w", path, err)
	}
	entries, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("addrbook: %s: %w", path, err)
	}
	for _, e := range entries {
		// Oldest address first, so that the newest ends up in front.
		slices.Reverse(e.Addrs)
		b.observeLocked(e.ID, e.Addrs, e.LastSeen)
	}
	b.dirty = false
	return b, nil
}

// Observe records that id was seen at the time at, reachable at addrs
// (which may be empty: the peer's known addresses are then kept). Addresses
// carrying a /p2p component are stored without it; an address naming a
// different peer is dropped. Observing a peer never moves its last-seen time
// backwards.
func (b *Book) Observe(id peer.ID, addrs []ma.Multiaddr, at time.Time) {
	if id == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.observeLocked(id, addrs, at)
}

func (b *Book) observeLocked(id peer.ID, addrs []ma.Multiaddr, at time.Time) {
	e, ok := b.entries[id]
	if !ok {
		if len(b.entries) >= b.cfg.MaxPeers {
			b.evictOldestLocked()
		}
		e = &Entry{ID: id}
		b.entries[id] = e
	}
	at = at.Truncate(time.Second)
	if at.After(e.LastSeen) {
		e.LastSeen = at
	}
	for _, a := range addrs {
		a, ok := transportPart(a, id)
		if !ok {
			continue
		}
		// Newest first: an address seen again moves to the front.
		e.Addrs = slices.DeleteFunc(e.Addrs, a.Equal)
		e.Addrs = slices.Insert(e.Addrs, 0, a)
	}
	if len(e.Addrs) > b.cfg.MaxAddrsPerPeer {
		e.Addrs = e.Addrs[:b.cfg.MaxAddrsPerPeer]
	}
	b.dirty = true
}

// transportPart strips a trailing /p2p/<id> from a, and reports false if it
// names a peer other than id or if nothing is left.
func transportPart(a ma.Multiaddr, id peer.ID) (ma.Multiaddr, bool) {
	if len(a) == 0 {
		return nil, false
	}
	transport, last := ma.SplitLast(a)
	if last != nil && last.Protocol().Code == ma.P_P2P {
		if peer.ID(last.RawValue()) != id {
			return nil, false
		}
		a = transport
	}
	if len(a) == 0 {
		return nil, false
	}
	return a, true
}

func (b *Book) evictOldestLocked() {
	var oldest *Entry
	for _, e := range b.entries {
		if oldest == nil || e.LastSeen.Before(oldest.LastSeen) ||
			(e.LastSeen.Equal(oldest.LastSeen) && e.ID < oldest.ID) {
			oldest = e
		}
	}
	if oldest != nil {
		delete(b.entries, oldest.ID)
	}
}

// Remove forgets id.
func (b *Book) Remove(id peer.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.entries[id]; ok {
		delete(b.entries, id)
		b.dirty = true
	}
}

// Recent returns up to n entries (all if n <= 0), those seen most recently
// first. The entries are copies.
func (b *Book) Recent(n int) []Entry {
	b.mu.Lock()
	out := make([]Entry, 0, len(b.entries))
	for _, e := range b.entries {
		out = append(out, Entry{ID: e.ID, Addrs: slices.Clone(e.Addrs), LastSeen: e.LastSeen})
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y Entry) int {
		if c := y.LastSeen.Compare(x.LastSeen); c != 0 {
			return c
		}
		if x.ID < y.ID {
			return -1
		}
		if x.ID > y.ID {
			return 1
		}
		return 0
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// Len returns the number of peers remembered.
func (b *Book) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries)
}

// Save writes the book to its file if it changed since the last Save. The
// write is atomic: readers see the old book or the new one, never a part.
func (b *Book) Save() error {
	if b.cfg.Dir == "" {
		return nil
	}
	b.mu.Lock()
	if !b.dirty {
		b.mu.Unlock()
		return nil
	}
	b.dirty = false
	b.mu.Unlock()
	data := Encode(b.Recent(0))
	if err := writeAtomic(b.cfg.Dir, FileName, data); err != nil {
		b.mu.Lock()
		b.dirty = true
		b.mu.Unlock()
		return fmt.Errorf("addrbook: save: %w", err)
	}
	return nil
}

func writeAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmpName, filepath.Join(dir, name)); err != nil {
		return err
	}
	// The rename is durable only once the directory entry is.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
