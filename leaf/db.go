package leaf

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
)

// DBFile is the leaf's database inside Config.Dir.
const DBFile = "leaf.db"

// Bounds of the database.
const (
	// maxDelivered is how many delivery ids are remembered to drop a
	// delivery that comes again after a lost acknowledgement.
	maxDelivered = 100_000
	// maxTombstones is how many evicted event ids are remembered, so a
	// catch-up does not fetch again what the eviction rule threw out.
	maxTombstones = 100_000
	// maxMsgIDs is how many DIDComm ids of picked-up messages are
	// remembered, so the same message forwarded twice is dropped
	// (spec/leaf.md "Local store and eviction").
	maxMsgIDs = 100_000
)

var (
	bMeta       = []byte("meta")
	bEvents     = []byte("events")       // id → header ‖ event JSON
	bRank       = []byte("rank")         // rank ‖ id → nil
	bTomb       = []byte("tomb")         // id → created_at
	bTombOrder  = []byte("tomb-order")   // seq → id
	bMsgs       = []byte("msgs")         // seq → message record JSON
	bMsgIDs     = []byte("msg-ids")      // sender ␠ DIDComm message id → seq
	bMsgIDOrder = []byte("msg-id-order") // order seq → sender ␠ DIDComm message id
	bDelivered  = []byte("delivered")    // delivery id → seq
	bDelivOrder = []byte("deliv-order")  // seq → delivery id
	bOutbox     = []byte("outbox")       // seq → outbox record JSON
	bRejected   = []byte("rejected")     // seq → outbox record JSON

	kState = []byte("state")
	kBytes = []byte("bytes")
)

// db is the leaf's bbolt database. Every Update is fsynced before it
// returns, so what it wrote survives a kill -9.
type db struct {
	bolt *bolt.DB
	// msgIDs is maxMsgIDs (tests lower it).
	msgIDs int
}

func openDB(dir string) (*db, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("leaf: %w", err)
	}
	b, err := bolt.Open(filepath.Join(dir, DBFile), 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("leaf: open %s: %w (is another leaf using this directory?)", filepath.Join(dir, DBFile), err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		for _, n := range append([][]byte{bMeta, bEvents, bRank, bTomb, bTombOrder, bMsgs, bMsgIDs, bMsgIDOrder, bDelivered, bDelivOrder, bOutbox, bRejected}, acctBuckets...) {
			if _, err := tx.CreateBucketIfNotExists(n); err != nil {
				return err
			}
		}
		return orderMsgIDs(tx)
	})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("leaf: %w", err)
	}
	return &db{bolt: b, msgIDs: maxMsgIDs}, nil
}

func (d *db) close() error { return d.bolt.Close() }

// orderMsgIDs gives the message ids a file kept before they were trimmed
// (no order bucket) their order, oldest message first, so they are
// trimmed too.
func orderMsgIDs(tx *bolt.Tx) error {
	ib, ob := tx.Bucket(bMsgIDs), tx.Bucket(bMsgIDOrder)
	if k, _ := ob.Cursor().First(); k != nil {
		return nil
	}
	type idSeq struct {
		id  []byte
		seq uint64
	}
	var ids []idSeq
	if err := ib.ForEach(func(k, v []byte) error {
		if len(v) == 8 {
			ids = append(ids, idSeq{bytes.Clone(k), binary.BigEndian.Uint64(v)})
		}
		return nil
	}); err != nil {
		return err
	}
	slices.SortFunc(ids, func(a, b idSeq) int { return cmp.Compare(a.seq, b.seq) })
	for _, it := range ids {
		seq, err := ob.NextSequence()
		if err != nil {
			return err
		}
		if err := ob.Put(u64key(seq), it.id); err != nil {
			return err
		}
	}
	return nil
}

// An event's value starts with a header that lets a filter on ids,
// authors, kinds and time be matched, and a negentropy item be made,
// without decoding its JSON: rank (8) ‖ created_at (8) ‖ kind (4) ‖
// pubkey (32).
const headerSize = 8 + 8 + 4 + 32

func eventHeader(rk []byte, ev *nostr.Event) []byte {
	h := append(append(make([]byte, 0, headerSize), rk...), u64key(uint64(ev.CreatedAt))...)
	h = binary.BigEndian.AppendUint32(h, uint32(ev.Kind))
	return append(h, ev.PubKey[:]...)
}

// headerMatches checks f against the header's fields; it is exact for a
// filter with no tag conditions (the caller decodes the event otherwise).
func headerMatches(f *nostr.Filter, id, h []byte) bool {
	createdAt := int64(binary.BigEndian.Uint64(h[8:16]))
	kind := int(binary.BigEndian.Uint32(h[16:20]))
	pub := [32]byte(h[20:52])
	if f.IDs != nil && !slices.Contains(f.IDs, [32]byte(id)) {
		return false
	}
	if f.Authors != nil && !slices.Contains(f.Authors, pub) {
		return false
	}
	if f.Kinds != nil && !slices.Contains(f.Kinds, kind) {
		return false
	}
	return (f.Since == 0 || createdAt >= f.Since) && (!f.HasUntil || createdAt <= f.Until)
}

func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// rankKey orders signed ranks as unsigned bytes.
func rankKey(rank int64) []byte { return u64key(uint64(rank) ^ (1 << 63)) }

// state is the leaf's small persistent state.
type state struct {
	Homes []homeState `json:"homes"`
	Subs  []subState  `json:"subs"`
	Push  string      `json:"push,omitempty"`
}

// homeState is one paired home node.
type homeState struct {
	DID      string `json:"did"`
	Endpoint string `json:"endpoint"` // DIDComm over HTTP
	Relay    string `json:"relay"`    // NIP-01 WebSocket
	Mediated bool   `json:"mediated"` // mediation granted and our DID registered
	Push     string `json:"push"`     // the push endpoint it has from us
}

// subState is one subscription and its catch-up progress.
type subState struct {
	Filter json.RawMessage `json:"filter"`
	// Covered: every matching event older than this was fetched, except
	// in Pending ranges, which a since walk still has to cover.
	Covered int64       `json:"covered"`
	Pending []timeRange `json:"pending,omitempty"`
}

// timeRange is created_at from Lo to Hi, both included.
type timeRange struct {
	Lo int64 `json:"lo"`
	Hi int64 `json:"hi"`
}

func (d *db) loadState() (state, error) {
	var s state
	err := d.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bMeta).Get(kState)
		if v == nil {
			return nil
		}
		return json.Unmarshal(v, &s)
	})
	return s, err
}

// updateState applies fn to the state and saves it, in one transaction.
func (d *db) updateState(fn func(*state) error) error {
	return d.bolt.Update(func(tx *bolt.Tx) error {
		var s state
		if v := tx.Bucket(bMeta).Get(kState); v != nil {
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
		}
		if err := fn(&s); err != nil {
			return err
		}
		v, err := json.Marshal(s)
		if err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(kState, v)
	})
}

// rankFunc gives a new event its eviction rank; seq is its storing order.
type rankFunc func(ev *nostr.Event, size int, seq uint64) int64

// putEvents stores events not stored before and evicts by rank until the
// store is within maxBytes, and adds c (nil: nothing) to the leaf's
// figures in the same transaction. It returns how many it stored.
func (d *db) putEvents(evs []*nostr.Event, rank rankFunc, maxBytes int64, c *countAdd) (int, error) {
	added := 0
	err := d.bolt.Update(func(tx *bolt.Tx) error {
		if err := c.apply(tx); err != nil {
			return err
		}
		eb, rb, meta := tx.Bucket(bEvents), tx.Bucket(bRank), tx.Bucket(bMeta)
		total := int64(0)
		if v := meta.Get(kBytes); v != nil {
			total = int64(binary.BigEndian.Uint64(v))
		}
		for _, ev := range evs {
			if eb.Get(ev.ID[:]) != nil || tx.Bucket(bTomb).Get(ev.ID[:]) != nil {
				continue
			}
			raw := ev.AppendJSON(nil)
			seq, err := eb.NextSequence()
			if err != nil {
				return err
			}
			rk := rankKey(rank(ev, len(raw), seq))
			if err := eb.Put(ev.ID[:], append(eventHeader(rk, ev), raw...)); err != nil {
				return err
			}
			if err := rb.Put(append(append([]byte{}, rk...), ev.ID[:]...), nil); err != nil {
				return err
			}
			total += int64(len(raw))
			added++
		}
		for total > maxBytes {
			k, _ := rb.Cursor().First()
			if k == nil {
				break
			}
			id := append([]byte{}, k[8:]...)
			v := eb.Get(id)
			if v != nil {
				total -= int64(len(v) - headerSize)
				if err := tombstone(tx, id, int64(binary.BigEndian.Uint64(v[8:16]))); err != nil {
					return err
				}
				if err := eb.Delete(id); err != nil {
					return err
				}
			}
			if err := rb.Delete(k); err != nil {
				return err
			}
		}
		return meta.Put(kBytes, u64key(uint64(max(total, 0))))
	})
	return added, err
}

// tombstone remembers an evicted id, forgetting the oldest beyond the
// bound.
func tombstone(tx *bolt.Tx, id []byte, createdAt int64) error {
	tb, ob := tx.Bucket(bTomb), tx.Bucket(bTombOrder)
	seq, err := ob.NextSequence()
	if err != nil {
		return err
	}
	if err := ob.Put(u64key(seq), id); err != nil {
		return err
	}
	if err := tb.Put(id, u64key(uint64(max(createdAt, 0)))); err != nil {
		return err
	}
	return trimOrder(tb, ob, seq, maxTombstones)
}

// trimOrder deletes from set and order the entries beyond the newest max.
func trimOrder(set, order *bolt.Bucket, seq uint64, max int) error {
	for {
		k, v := order.Cursor().First()
		if k == nil || seq-binary.BigEndian.Uint64(k)+1 <= uint64(max) {
			return nil
		}
		if err := set.Delete(v); err != nil {
			return err
		}
		if err := order.Delete(k); err != nil {
			return err
		}
	}
}

// eachEvent calls fn with every stored event matching f.
func (d *db) eachEvent(f *nostr.Filter, fn func(ev *nostr.Event) bool) error {
	return d.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bEvents).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 32 || len(v) < headerSize {
				continue
			}
			if f != nil && !headerMatches(f, k, v) {
				continue
			}
			var ev nostr.Event
			if err := json.Unmarshal(v[headerSize:], &ev); err != nil {
				return fmt.Errorf("leaf: stored event %x: %w", k, err)
			}
			if f == nil || f.Matches(&ev) {
				if !fn(&ev) {
					return nil
				}
			}
		}
		return nil
	})
}

// eachItem calls fn with the id and created_at of every stored event
// matching f, decoding an event's JSON only when f has tag conditions.
func (d *db) eachItem(f *nostr.Filter, fn func(id [32]byte, createdAt int64) bool) error {
	if len(f.Tags) > 0 || f.Search != "" {
		return d.eachEvent(f, func(ev *nostr.Event) bool { return fn(ev.ID, ev.CreatedAt) })
	}
	return d.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bEvents).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 32 || len(v) < headerSize || !headerMatches(f, k, v) {
				continue
			}
			if !fn([32]byte(k), int64(binary.BigEndian.Uint64(v[8:16]))) {
				return nil
			}
		}
		return nil
	})
}

// eachTombstone calls fn with every remembered evicted id.
func (d *db) eachTombstone(fn func(id [32]byte, createdAt int64)) error {
	return d.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bTomb).ForEach(func(k, v []byte) error {
			if len(k) == 32 && len(v) == 8 {
				fn([32]byte(k), int64(binary.BigEndian.Uint64(v)))
			}
			return nil
		})
	})
}

// storeBytes is the JSON bytes of the stored events.
func (d *db) storeBytes() (int64, error) {
	var n int64
	err := d.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(kBytes); v != nil {
			n = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return n, err
}

// message is a picked-up DIDComm message as the app reads it.
type message struct {
	Seq           int64           `json:"seq"`
	DeliveryID    string          `json:"delivery_id"`
	Mediator      string          `json:"mediator"`
	ID            string          `json:"id,omitempty"`
	From          string          `json:"from,omitempty"`
	Authenticated bool            `json:"authenticated"`
	Message       json.RawMessage `json:"message,omitempty"`
	// Packed and Error are set when the message could not be unpacked:
	// it is kept, not dropped, so nothing acknowledged is lost.
	Packed json.RawMessage `json:"packed,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// putMessages stores a delivery's messages in one transaction, dropping
// those whose delivery id or DIDComm id is stored already, and counts the
// whole delivery as mediation the home gave in the window of now (secs
// long), as the home counts what it delivers. It returns how many it
// stored.
func (d *db) putMessages(ms []message, home string, secs int64, now time.Time) (int, error) {
	added := 0
	err := d.bolt.Update(func(tx *bolt.Tx) error {
		if len(ms) > 0 {
			if err := count(tx, home, secs, now, func(s *receipt.Side) { s.Received.MediationMessages += uint64(len(ms)) }); err != nil {
				return err
			}
		}
		mb, ib, db, ob := tx.Bucket(bMsgs), tx.Bucket(bMsgIDs), tx.Bucket(bDelivered), tx.Bucket(bDelivOrder)
		iob := tx.Bucket(bMsgIDOrder)
		for _, m := range ms {
			if db.Get([]byte(m.DeliveryID)) != nil {
				continue
			}
			dseq, err := ob.NextSequence()
			if err != nil {
				return err
			}
			if err := ob.Put(u64key(dseq), []byte(m.DeliveryID)); err != nil {
				return err
			}
			if err := db.Put([]byte(m.DeliveryID), u64key(dseq)); err != nil {
				return err
			}
			if err := trimOrder(db, ob, dseq, maxDelivered); err != nil {
				return err
			}
			idKey := []byte(m.From + " " + m.ID)
			if m.ID != "" && ib.Get(idKey) != nil {
				continue // the same message forwarded twice
			}
			seq, err := mb.NextSequence()
			if err != nil {
				return err
			}
			m.Seq = int64(seq)
			v, err := json.Marshal(m)
			if err != nil {
				return err
			}
			if err := mb.Put(u64key(seq), v); err != nil {
				return err
			}
			if m.ID != "" {
				if err := ib.Put(idKey, u64key(seq)); err != nil {
					return err
				}
				iseq, err := iob.NextSequence()
				if err != nil {
					return err
				}
				if err := iob.Put(u64key(iseq), idKey); err != nil {
					return err
				}
				if err := trimOrder(ib, iob, iseq, d.msgIDs); err != nil {
					return err
				}
			}
			added++
		}
		return nil
	})
	return added, err
}

// messages returns up to limit stored messages after seq, as a JSON array.
func (d *db) messages(after int64, limit int) ([]byte, error) {
	out := []json.RawMessage{}
	err := d.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bMsgs).Cursor()
		for k, v := c.Seek(u64key(uint64(after) + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			out = append(out, append(json.RawMessage{}, v...))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// deleteMessage removes a message the app has handled. Its ids stay
// remembered, so a late redelivery is still dropped.
func (d *db) deleteMessage(seq int64) error {
	return d.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bMsgs).Delete(u64key(uint64(seq)))
	})
}

// Outbox entry kinds.
const (
	outEvent   = "event"
	outMessage = "message"
)

// outboxEntry is something written while offline, kept until its home
// node accepted it.
type outboxEntry struct {
	Seq   uint64          `json:"-"`
	Kind  string          `json:"kind"`
	ID    string          `json:"id"`            // event id or DIDComm message id
	Data  json.RawMessage `json:"data"`          // the event, or the packed message
	To    string          `json:"to,omitempty"`  // message: the DID it is for
	Via   string          `json:"via,omitempty"` // message: the home DID that takes it
	Tries int             `json:"tries"`
	// Reason is the last refusal.
	Reason string `json:"reason,omitempty"`
}

func (d *db) addOutbox(e outboxEntry) error {
	return d.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bOutbox)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return b.Put(u64key(seq), v)
	})
}

func (d *db) outbox(kind string) ([]outboxEntry, error) {
	var out []outboxEntry
	err := d.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bOutbox).ForEach(func(k, v []byte) error {
			var e outboxEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			e.Seq = binary.BigEndian.Uint64(k)
			if kind == "" || e.Kind == kind {
				out = append(out, e)
			}
			return nil
		})
	})
	return out, err
}

// acceptOutbox removes an entry a home accepted (OK true), from the
// outbox or, if another home refused it for good first, from the
// rejected list, and adds c to the leaf's figures in the same
// transaction. It reports whether the entry was still waiting (the first
// home to accept it).
func (d *db) acceptOutbox(e outboxEntry, c *countAdd) (first bool, err error) {
	err = d.bolt.Update(func(tx *bolt.Tx) error {
		if err := c.apply(tx); err != nil {
			return err
		}
		k := u64key(e.Seq)
		first = tx.Bucket(bOutbox).Get(k) != nil
		if err := tx.Bucket(bOutbox).Delete(k); err != nil {
			return err
		}
		return tx.Bucket(bRejected).Delete(k)
	})
	return first, err
}

// getEvents returns the stored events among ids (the others are gone or
// were never held).
func (d *db) getEvents(ids [][32]byte) ([]*nostr.Event, error) {
	var out []*nostr.Event
	err := d.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bEvents)
		for _, id := range ids {
			v := b.Get(id[:])
			if len(v) < headerSize {
				continue
			}
			ev := new(nostr.Event)
			if err := json.Unmarshal(v[headerSize:], ev); err != nil {
				return fmt.Errorf("leaf: stored event %x: %w", id, err)
			}
			out = append(out, ev)
		}
		return nil
	})
	return out, err
}

// settleOutbox removes an entry its home accepted, or moves one it
// refused for good to the rejected list (reason set), or records a
// transient refusal (keep set).
func (d *db) settleOutbox(e outboxEntry, reason string, keep bool) error {
	return d.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bOutbox)
		k := u64key(e.Seq)
		if b.Get(k) == nil {
			return nil
		}
		e.Reason = reason
		if keep {
			e.Tries++
			v, err := json.Marshal(e)
			if err != nil {
				return err
			}
			return b.Put(k, v)
		}
		if err := b.Delete(k); err != nil {
			return err
		}
		if reason == "" {
			return nil
		}
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return tx.Bucket(bRejected).Put(k, v)
	})
}

func (d *db) rejected() ([]byte, error) {
	out := []json.RawMessage{}
	err := d.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bRejected).ForEach(func(_, v []byte) error {
			out = append(out, append(json.RawMessage{}, v...))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

var errClosed = errors.New("leaf: closed")

// sameFilter compares two filters' JSON.
func sameFilter(a, b json.RawMessage) bool { return bytes.Equal(a, b) }
