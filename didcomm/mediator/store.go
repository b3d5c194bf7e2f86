package mediator

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketGrants     = []byte("grants")     // leaf DID → grant
	bucketRecipients = []byte("recipients") // recipient DID → leaf DID
	bucketQueues     = []byte("queues")     // recipient DID → bucket of seq → queued
	bucketIDs        = []byte("ids")        // recipient DID → bucket of message id → seq
)

// queued is a message held for a recipient.
type queued struct {
	ID       string          `json:"id"`
	Message  json.RawMessage `json:"message"`
	Received int64           `json:"received"`
}

type grant struct {
	Granted int64 `json:"granted"`
}

// store is the mediator's persistent state.
type store struct {
	db *bolt.DB
}

// FileName is the mediator's database file inside its directory.
const FileName = "mediator.db"

func openStore(dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mediator: %w", err)
	}
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("mediator: open %s: %w", dir, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketGrants, bucketRecipients, bucketQueues, bucketIDs} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("mediator: %w", err)
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

var errLimit = errors.New("limit reached")

// addGrant records a grant for leaf unless maxLeaves grants exist already.
func (s *store) addGrant(leaf string, now time.Time, maxLeaves int) (bool, error) {
	granted := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketGrants)
		if b.Get([]byte(leaf)) != nil {
			granted = true
			return nil
		}
		if b.Stats().KeyN >= maxLeaves {
			return nil
		}
		v, _ := json.Marshal(grant{Granted: now.Unix()})
		granted = true
		return b.Put([]byte(leaf), v)
	})
	return granted, err
}

func (s *store) hasGrant(leaf string) (bool, error) {
	ok := false
	err := s.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketGrants).Get([]byte(leaf)) != nil
		return nil
	})
	return ok, err
}

// Update results of recipient-update (coordinate-mediation 3.0).
const (
	resultSuccess     = "success"
	resultNoChange    = "no_change"
	resultClientError = "client_error"
	resultServerError = "server_error"
)

// updateRecipient adds or removes recipient for leaf.
func (s *store) updateRecipient(leaf, recipient, action string, maxPerLeaf int) (string, error) {
	result := resultServerError
	err := s.db.Update(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketRecipients)
		owner := rb.Get([]byte(recipient))
		switch action {
		case "add":
			if owner != nil {
				if string(owner) == leaf {
					result = resultNoChange
				} else {
					result = resultClientError // another leaf's recipient
				}
				return nil
			}
			if n := len(recipientsOf(tx, leaf)); n >= maxPerLeaf {
				result = resultClientError
				return nil
			}
			result = resultSuccess
			return rb.Put([]byte(recipient), []byte(leaf))
		case "remove":
			if owner == nil || string(owner) != leaf {
				result = resultNoChange
				return nil
			}
			result = resultSuccess
			if err := rb.Delete([]byte(recipient)); err != nil {
				return err
			}
			// Queued messages for a removed recipient are dropped with it.
			if tx.Bucket(bucketQueues).Bucket([]byte(recipient)) != nil {
				if err := tx.Bucket(bucketQueues).DeleteBucket([]byte(recipient)); err != nil {
					return err
				}
			}
			if tx.Bucket(bucketIDs).Bucket([]byte(recipient)) != nil {
				return tx.Bucket(bucketIDs).DeleteBucket([]byte(recipient))
			}
			return nil
		default:
			result = resultClientError
			return nil
		}
	})
	return result, err
}

func recipientsOf(tx *bolt.Tx, leaf string) []string {
	var out []string
	_ = tx.Bucket(bucketRecipients).ForEach(func(k, v []byte) error {
		if string(v) == leaf {
			out = append(out, string(k))
		}
		return nil
	})
	return out
}

func (s *store) recipients(leaf string) ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		out = recipientsOf(tx, leaf)
		return nil
	})
	return out, err
}

// owner returns the leaf that registered recipient, or "".
func (s *store) owner(recipient string) (string, error) {
	var out string
	err := s.db.View(func(tx *bolt.Tx) error {
		out = string(tx.Bucket(bucketRecipients).Get([]byte(recipient)))
		return nil
	})
	return out, err
}

// enqueue stores msg for recipient within the count and byte bounds. The
// transaction is fsynced before enqueue returns.
func (s *store) enqueue(recipient string, q queued, maxCount int, maxBytes int64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		qb, err := tx.Bucket(bucketQueues).CreateBucketIfNotExists([]byte(recipient))
		if err != nil {
			return err
		}
		ib, err := tx.Bucket(bucketIDs).CreateBucketIfNotExists([]byte(recipient))
		if err != nil {
			return err
		}
		n, size := 0, int64(0)
		_ = qb.ForEach(func(_, v []byte) error {
			n++
			size += int64(len(v))
			return nil
		})
		v, err := json.Marshal(q)
		if err != nil {
			return err
		}
		if n >= maxCount || size+int64(len(v)) > maxBytes {
			return fmt.Errorf("queue for %s holds %d messages, %d bytes: %w", recipient, n, size, errLimit)
		}
		seq, err := qb.NextSequence()
		if err != nil {
			return err
		}
		key := make([]byte, 8)
		binary.BigEndian.PutUint64(key, seq)
		if err := qb.Put(key, v); err != nil {
			return err
		}
		return ib.Put([]byte(q.ID), key)
	})
}

// queued counts the queued messages of recipients, reading no message.
func (s *store) queued(recipients []string) (int, error) {
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, r := range recipients {
			if qb := tx.Bucket(bucketQueues).Bucket([]byte(r)); qb != nil {
				n += qb.Stats().KeyN
			}
		}
		return nil
	})
	return n, err
}

// status counts the queued messages of recipients.
func (s *store) status(recipients []string) (count int, bytes int64, oldest int64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		for _, r := range recipients {
			qb := tx.Bucket(bucketQueues).Bucket([]byte(r))
			if qb == nil {
				continue
			}
			err := qb.ForEach(func(_, v []byte) error {
				var q queued
				if err := json.Unmarshal(v, &q); err != nil {
					return err
				}
				count++
				bytes += int64(len(q.Message))
				if oldest == 0 || q.Received < oldest {
					oldest = q.Received
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return count, bytes, oldest, err
}

// peek returns up to limit queued messages of recipients (and up to
// maxBytes of them, but always at least one), oldest first per recipient,
// without removing them.
func (s *store) peek(recipients []string, limit, maxBytes int) ([]queued, error) {
	var out []queued
	size := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, r := range recipients {
			qb := tx.Bucket(bucketQueues).Bucket([]byte(r))
			if qb == nil {
				continue
			}
			c := qb.Cursor()
			for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
				var q queued
				if err := json.Unmarshal(v, &q); err != nil {
					return err
				}
				if len(out) > 0 && size+len(q.Message) > maxBytes {
					return nil
				}
				size += len(q.Message)
				out = append(out, q)
			}
		}
		return nil
	})
	return out, err
}

// remove deletes the messages with these ids from recipients' queues.
func (s *store) remove(recipients []string, ids []string) (int, error) {
	removed := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range recipients {
			qb := tx.Bucket(bucketQueues).Bucket([]byte(r))
			ib := tx.Bucket(bucketIDs).Bucket([]byte(r))
			if qb == nil || ib == nil {
				continue
			}
			for _, id := range ids {
				key := ib.Get([]byte(id))
				if key == nil {
					continue
				}
				if err := qb.Delete(append([]byte{}, key...)); err != nil {
					return err
				}
				if err := ib.Delete([]byte(id)); err != nil {
					return err
				}
				removed++
			}
		}
		return nil
	})
	return removed, err
}
