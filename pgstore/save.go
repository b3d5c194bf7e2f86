package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// ErrEphemeral is wrapped by Save for an ephemeral event: those are never
// stored; Broadcast hands one to the other front-ends' followers.
var ErrEphemeral = errors.New("pgstore: ephemeral events are never stored")

// Save stores an event durably, applying its kind's storage rules (the
// Pebble store's). The event's signature must already have been
// verified. Saves wait for one of the store's writers, which commits
// whatever saves are waiting as one transaction (writer.go); when Save
// returns Stored with a nil error, the event and its change are committed.
// A caller whose ctx ends stops waiting, but what a writer took may still
// commit.
func (s *Store) Save(ctx context.Context, ev *nostr.Event) (eventstore.Result, error) {
	if nostr.ClassOf(ev.Kind) == nostr.Ephemeral {
		return 0, fmt.Errorf("%w: kind %d", ErrEphemeral, ev.Kind)
	}
	if exp, ok := ev.Expiration(); ok && exp <= s.opts.Now().Unix() {
		return eventstore.Expired, nil
	}
	req := &saveReq{ev: ev, done: make(chan struct{})}
	s.mu.RLock()
	if s.isClosed {
		s.mu.RUnlock()
		return 0, ErrClosed
	}
	select {
	case s.writes <- req:
	case <-ctx.Done():
		s.mu.RUnlock()
		return 0, ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case <-req.done:
		return req.res, req.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// slot is a replacement slot: a replaceable event's (pubkey, kind, ""), an
// addressable event's (pubkey, kind, d).
type slot struct {
	pubkey [32]byte
	kind   int
	d      string
}

// slotOf returns ev's slot, and false for kinds that are never replaced.
func slotOf(ev *nostr.Event) (slot, bool) {
	switch nostr.ClassOf(ev.Kind) {
	case nostr.Replaceable:
		return slot{ev.PubKey, ev.Kind, ""}, true
	case nostr.Addressable:
		return slot{ev.PubKey, ev.Kind, ev.DTag()}, true
	}
	return slot{}, false
}

// Advisory lock keys: an id's is its first 8 bytes (ids are hashes), a
// slot's a hash of it. Two keys that collide only serialise two saves that
// did not need it.
func idLock(id [32]byte) int64 { return int64(binary.BigEndian.Uint64(id[:8])) }

func (sl slot) lock() int64 {
	h := xxhash.New()
	h.Write(sl.pubkey[:])
	h.Write(binary.BigEndian.AppendUint16(nil, uint16(sl.kind)))
	h.WriteString(sl.d)
	return int64(h.Sum64())
}

// deletion is what a NIP-09 deletion request names that its author may
// delete: ids by "e" tags and slots by "a" tags.
type deletion struct {
	ids   [][]byte
	slots []slot
}

func deletionOf(del *nostr.Event) deletion {
	var d deletion
	seen := map[[32]byte]bool{}
	seenSlot := map[slot]bool{}
	for _, t := range del.Tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "e":
			var id [32]byte
			if nostr.DecodeHex(id[:], t[1]) != nil || seen[id] {
				continue
			}
			seen[id] = true
			d.ids = append(d.ids, id[:])
		case "a":
			sl, ok := parseAddress(t[1])
			if !ok || sl.pubkey != del.PubKey || seenSlot[sl] {
				continue
			}
			seenSlot[sl] = true
			d.slots = append(d.slots, sl)
		}
	}
	return d
}

// parseAddress parses an "a" tag value kind:pubkey:d; a replaceable
// kind's address has d "" whatever it says.
func parseAddress(a string) (slot, bool) {
	ks, rest, ok1 := strings.Cut(a, ":")
	ps, d, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return slot{}, false
	}
	var sl slot
	k, err := strconv.Atoi(ks)
	if err != nil || k < 0 || k > nostr.MaxKind || nostr.DecodeHex(sl.pubkey[:], ps) != nil {
		return slot{}, false
	}
	if nostr.ClassOf(k) == nostr.Replaceable {
		d = ""
	}
	sl.kind, sl.d = k, d
	return sl, true
}

// tagValues lists ev's distinct single-letter tags as the tags table
// holds them: the letter's byte, then the first value.
func tagValues(ev *nostr.Event) [][]byte {
	var out [][]byte
	for _, t := range ev.Tags {
		if len(t) < 2 || len(t[0]) != 1 {
			continue
		}
		tv := append([]byte{t[0][0]}, t[1]...)
		if !slices.ContainsFunc(out, func(o []byte) bool { return bytes.Equal(o, tv) }) {
			out = append(out, tv)
		}
	}
	return out
}

// dOf is the d column of ev: nil (SQL NULL) unless it has a slot.
func dOf(ev *nostr.Event) []byte {
	if sl, ok := slotOf(ev); ok {
		return append([]byte{}, sl.d...)
	}
	return nil
}
