package store

import (
	"errors"
	"fmt"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/cockroachdb/pebble/v2"
)

// knownIDs is an in-memory Bloom filter of every id the store has a key
// for: stored events (I keys) and NIP-09 tombstones (D keys). A save asks
// it first; when it says an id was never seen, the save skips its two
// point reads (duplicate and tombstone), which were the largest part of the
// writer's own CPU on a store of a million events even with Pebble's
// per-table filters: each read still seeks the memtables and opens an
// iterator on every level. An id it answers "maybe" for is read as before,
// so a false positive (about 0.5 % per stage) costs one read and nothing
// else; ids of events later removed stay in it for the same reason.
//
// It grows as a scalable Bloom filter (Almeida, Baquero, Preguiça and
// Hutchison, "Scalable Bloom Filters", IPL 101(6), 2007): when the newest
// stage holds its capacity, a stage of twice the capacity is added, and a
// lookup asks every stage. Memory is about 1.4 bytes per id, and the stage
// count grows with the logarithm of the store's size.
//
// Only the store's writer goroutine touches a knownIDs; the one built from
// disk at Open is made by a loader goroutine and handed over whole.
type knownIDs struct {
	stages []*bloom.BloomFilter
	count  uint // ids added to the newest stage
	cap    uint // capacity of the newest stage
}

const (
	// knownFirstStage is the capacity of the first stage: 64 Ki ids, about
	// 90 KiB, so a small node (a phone) pays little.
	knownFirstStage = 1 << 16
	// knownFalsePositive is each stage's false-positive rate at capacity.
	knownFalsePositive = 0.005
)

func newKnownIDs() *knownIDs { return &knownIDs{} }

// add records an id.
func (k *knownIDs) add(id *[32]byte) {
	if k.count >= k.cap {
		k.cap = max(knownFirstStage, 2*k.cap)
		k.stages = append(k.stages, bloom.NewWithEstimates(k.cap, knownFalsePositive))
		k.count = 0
	}
	k.stages[len(k.stages)-1].Add(id[:])
	k.count++
}

// mayHave reports whether id may have been added; false means it was not.
func (k *knownIDs) mayHave(id *[32]byte) bool {
	for _, s := range k.stages {
		if s.Test(id[:]) {
			return true
		}
	}
	return false
}

// merge appends other's stages. A lookup asks every stage, so the result
// answers for both sets.
func (k *knownIDs) merge(other *knownIDs) {
	if len(other.stages) == 0 {
		return
	}
	// The receiver keeps adding to its own newest stage, so other's
	// stages go in front of it.
	k.stages = append(append([]*bloom.BloomFilter(nil), other.stages...), k.stages...)
}

// knownIDRanges are the key ranges loadKnownIDs reads: stored ids (I) and
// tombstones (D), each key a prefix byte and an id (a tombstone's then
// its deleter's pubkey).
var knownIDRanges = [][2]byte{{pID, pID + 1}, {pDeletedID, pDeletedID + 1}}

// loadIters are the loader's iterators: one per knownIDRanges, and one
// over the event keys.
type loadIters struct {
	ids     []*pebble.Iterator
	records *pebble.Iterator
}

// openLoadIters opens the loader's iterators; Open calls it before the
// writer starts, so together they see exactly the store written before
// then.
func openLoadIters(db *pebble.DB) (loadIters, error) {
	var its loadIters
	for _, r := range append(append([][2]byte(nil), knownIDRanges...), [2]byte{pEvent, pEvent + 1}) {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: r[:1], UpperBound: r[1:]})
		if err != nil {
			for _, it := range its.ids {
				it.Close()
			}
			return loadIters{}, fmt.Errorf("store: %w", err)
		}
		if r[0] == pEvent {
			its.records = it
		} else {
			its.ids = append(its.ids, it)
		}
	}
	return its, nil
}

// loadLive adds up the live record bytes per segment that the event
// keys it iterates name, and closes it. It gives up with ErrClosed when
// stop is closed.
func loadLive(it *pebble.Iterator, stop <-chan struct{}) (map[uint32]int64, error) {
	live := map[uint32]int64{}
	var err error
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if lc, ok := parseLoc(it.Value()); ok {
			live[lc.seg] += int64(lc.size)
		}
		if n++; n%4096 == 0 {
			select {
			case <-stop:
				it.Close()
				return nil, ErrClosed
			default:
			}
		}
	}
	if err = errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("store: counting records: %w", err)
	}
	return live, nil
}

// loadKnownIDs reads the ids its iterators see into a new knownIDs, and
// closes them. It gives up with ErrClosed when stop is closed.
func loadKnownIDs(its []*pebble.Iterator, stop <-chan struct{}) (*knownIDs, error) {
	k := newKnownIDs()
	var id [32]byte
	var err error
	for _, it := range its {
		n := 0
		for ok := it.First(); ok && err == nil; ok = it.Next() {
			if key := it.Key(); len(key) >= 1+len(id) {
				copy(id[:], key[1:])
				k.add(&id)
			}
			if n++; n%4096 == 0 {
				select {
				case <-stop:
					err = ErrClosed
				default:
				}
			}
		}
		err = errors.Join(err, it.Error(), it.Close())
	}
	if errors.Is(err, ErrClosed) {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading ids: %w", err)
	}
	return k, nil
}
