package receipt

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// SampleSize is how many event keys one direction of Evidence samples at
// most (spec/disputes.md "Evidence").
const SampleSize = 32

// Evidence is one side's evidence for a window's event figures with one
// peer (spec/disputes.md "Evidence"): for what it gave and what it
// received, a digest of the events and a bounded sample of them. It is
// exchanged in a dispute, never signed into a receipt.
type Evidence struct {
	Gave     EventSet `json:"gave"`
	Received EventSet `json:"received"`
}

// EventSet summarises a set of events by their keys: an event's key is
// the first 8 bytes of its id, as 16 hex digits.
type EventSet struct {
	// Events is how many events were keyed (the events counted whose id
	// the meter could read).
	Events uint64 `json:"events"`
	// Digest is the sum of the keys modulo 2^64, as 16 hex digits: the
	// same multiset of events has the same digest at both ends.
	Digest string `json:"digest"`
	// Sample is the smallest keys of the set, at most SampleSize, in
	// ascending order: a bottom-k sketch, so two sides sampling the same
	// events keep the same keys.
	Sample []string `json:"sample"`
}

// Key formats an event key.
func Key(k uint64) string { return fmt.Sprintf("%016x", k) }

// ParseKey reads an event key.
func ParseKey(s string) (uint64, error) {
	if len(s) != 16 || strings.IndexFunc(s, func(r rune) bool { return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') }) >= 0 {
		return 0, fmt.Errorf("event key %q: want 16 lowercase hex digits", s)
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return 0, fmt.Errorf("event key %q: %v", s, err)
	}
	return binary.BigEndian.Uint64(b[:]), nil
}

// Check refuses evidence that is out of bounds or malformed, so a peer
// cannot make a node hold or compare more than SampleSize keys a side.
func (e Evidence) Check() error {
	for _, s := range []EventSet{e.Gave, e.Received} {
		if len(s.Sample) > SampleSize {
			return fmt.Errorf("evidence: a sample of %d keys (at most %d)", len(s.Sample), SampleSize)
		}
		if s.Digest != "" {
			if _, err := ParseKey(s.Digest); err != nil {
				return fmt.Errorf("evidence: digest: %v", err)
			}
		}
		prev := ""
		for _, k := range s.Sample {
			if _, err := ParseKey(k); err != nil {
				return fmt.Errorf("evidence: %v", err)
			}
			if k <= prev {
				return fmt.Errorf("evidence: sample keys must ascend, without repeats")
			}
			prev = k
		}
	}
	return nil
}

// Missing returns the keys of claimed (what a peer says it gave, or
// received) that are absent from seen (what this side counts the other
// way). A key of claimed is compared only where seen's sketch is
// complete: seen holds every key of its set, or the key is not above
// seen's largest sampled key (a bottom-k sketch keeps every key of its
// set up to its largest). Keys are fixed-width hex, which sorts as the
// numbers do.
func Missing(claimed, seen EventSet) []string {
	full := len(seen.Sample) == SampleSize
	var out []string
	for _, k := range claimed.Sample {
		if full && k > seen.Sample[SampleSize-1] {
			break
		}
		if _, found := slices.BinarySearch(seen.Sample, k); !found {
			out = append(out, k)
		}
	}
	return out
}

// Merge returns the set of s's events and o's together: the counts and
// digests add, and the sample is the smallest SampleSize keys of both. A
// node that saved part of a window's figures at a stop adds the rest it
// counts after its restart this way (spec/disputes.md "Stops").
func (s EventSet) Merge(o EventSet) EventSet {
	d1, _ := ParseKey(s.Digest)
	d2, _ := ParseKey(o.Digest)
	sample := slices.Compact(slices.Sorted(slices.Values(append(slices.Clip(s.Sample), o.Sample...))))
	if len(sample) > SampleSize {
		sample = sample[:SampleSize]
	}
	return EventSet{Events: s.Events + o.Events, Digest: Key(d1 + d2), Sample: sample}
}

// Merge returns e's and o's evidence together, each direction merged
// (EventSet.Merge).
func (e Evidence) Merge(o Evidence) Evidence {
	return Evidence{Gave: e.Gave.Merge(o.Gave), Received: e.Received.Merge(o.Received)}
}
