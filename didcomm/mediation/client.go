package mediation

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/problemreport"
)

// Exchange sends one packed message to the mediator and returns its answer
// on the same connection (nil when it sent none): an HTTP POST or a libp2p
// stream, from didcomm/transport.
type Exchange func(ctx context.Context, packed []byte) ([]byte, error)

// Client is the recipient (leaf) side of coordinate-mediation and pickup.
type Client struct {
	Packer   *didcomm.Packer
	Unpacker *didcomm.Unpacker
	Mediator string // the mediator's DID
	Exchange Exchange
	// Seen drops messages delivered again after a lost acknowledgement.
	Seen *Seen
}

// Request sends an authcrypted request of any protocol the mediator's
// node serves (a leaf's receipts go to its home this way) with
// return_route "all" and returns the unpacked answer. A problem report
// comes back as a *didcomm.Problem with the mediator's code.
func (c *Client) Request(ctx context.Context, typ string, body any) (*didcomm.Message, error) {
	m, err := didcomm.NewMessage(typ, body)
	if err != nil {
		return nil, err
	}
	m.To, m.ReturnRoute = []string{c.Mediator}, "all"
	packed, err := c.Packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		return nil, err
	}
	raw, err := c.Exchange(ctx, packed)
	if err != nil {
		return nil, fmt.Errorf("mediator: %s: %w", typ, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("mediator: no answer to %s", typ)
	}
	got, err := c.Unpacker.Unpack(raw)
	if err != nil {
		return nil, fmt.Errorf("mediator: answer to %s: %w", typ, err)
	}
	r := got.Message
	if r.Type == problemreport.Type {
		b, err := problemreport.Parse(r)
		if err != nil {
			return nil, err
		}
		return nil, &didcomm.Problem{Code: b.Code, Err: fmt.Errorf("mediator refused %s: %s", typ, b.Comment)}
	}
	if !got.Authenticated || r.From != c.Mediator {
		return nil, &didcomm.Problem{Code: didcomm.CodeSenderMismatch, Err: fmt.Errorf("answer to %s is not from the mediator %s", typ, c.Mediator)}
	}
	if r.Thid != m.ID {
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("answer to %s is on thread %q", typ, r.Thid)}
	}
	return r, nil
}

// ErrDenied is returned when the mediator denies mediation.
var ErrDenied = errors.New("mediator: mediation denied")

// RequestMediation asks for mediation and returns the routing DIDs to give
// senders.
func (c *Client) RequestMediation(ctx context.Context) ([]string, error) {
	r, err := c.Request(ctx, TypeMediateRequest, struct{}{})
	if err != nil {
		return nil, err
	}
	switch r.Type {
	case TypeMediateGrant:
		var b GrantBody
		if err := json.Unmarshal(r.Body, &b); err != nil || len(b.RoutingDID) == 0 {
			return nil, fmt.Errorf("mediator: grant without routing_did")
		}
		return b.RoutingDID, nil
	case TypeMediateDeny:
		return nil, ErrDenied
	}
	return nil, fmt.Errorf("mediator: unexpected answer %s", r.Type)
}

// UpdateRecipients adds and removes recipient DIDs and returns the results.
func (c *Client) UpdateRecipients(ctx context.Context, updates ...Update) ([]UpdateResult, error) {
	r, err := c.Request(ctx, TypeRecipientUpdate, RecipientUpdateBody{Updates: updates})
	if err != nil {
		return nil, err
	}
	var b RecipientUpdateResponseBody
	if r.Type != TypeRecipientUpdateResponse || json.Unmarshal(r.Body, &b) != nil {
		return nil, fmt.Errorf("mediator: unexpected answer %s", r.Type)
	}
	return b.Updated, nil
}

// Recipients lists the registered recipient DIDs.
func (c *Client) Recipients(ctx context.Context) ([]string, error) {
	r, err := c.Request(ctx, TypeRecipientQuery, struct{}{})
	if err != nil {
		return nil, err
	}
	var b RecipientBody
	if r.Type != TypeRecipient || json.Unmarshal(r.Body, &b) != nil {
		return nil, fmt.Errorf("mediator: unexpected answer %s", r.Type)
	}
	out := make([]string, 0, len(b.Dids))
	for _, d := range b.Dids {
		out = append(out, d.RecipientDID)
	}
	return out, nil
}

// Status asks how many messages wait.
func (c *Client) Status(ctx context.Context) (*StatusBody, error) {
	r, err := c.Request(ctx, TypeStatusRequest, struct{}{})
	if err != nil {
		return nil, err
	}
	var b StatusBody
	if r.Type != TypeStatus || json.Unmarshal(r.Body, &b) != nil {
		return nil, fmt.Errorf("mediator: unexpected answer %s", r.Type)
	}
	return &b, nil
}

// Collect fetches every queued message in batches of limit, hands each one
// not seen before to handle, and acknowledges the batch. It returns how
// many messages handle received. If handle fails, that batch is not
// acknowledged and the mediator keeps it.
func (c *Client) Collect(ctx context.Context, limit int, handle func(id string, packed []byte) error) (int, error) {
	n := 0
	for {
		r, err := c.Request(ctx, TypeDeliveryRequest, DeliveryRequestBody{Limit: limit})
		if err != nil {
			return n, err
		}
		if r.Type == TypeStatus {
			return n, nil // nothing queued
		}
		if r.Type != TypeDelivery || len(r.Attachments) == 0 {
			return n, fmt.Errorf("mediator: unexpected answer %s", r.Type)
		}
		var ids []string
		for _, a := range r.Attachments {
			if a.ID == "" || len(a.Data.JSON) == 0 {
				return n, fmt.Errorf("mediator: delivery attachment without id or JSON data")
			}
			ids = append(ids, a.ID)
			if c.Seen != nil {
				seen, err := c.Seen.Has(a.ID)
				if err != nil {
					return n, err
				}
				if seen {
					continue
				}
			}
			if err := handle(a.ID, a.Data.JSON); err != nil {
				return n, err
			}
			n++
			if c.Seen != nil {
				if err := c.Seen.Add(a.ID); err != nil {
					return n, err
				}
			}
		}
		if _, err := c.Request(ctx, TypeMessagesReceived, MessagesReceivedBody{MessageIDList: ids}); err != nil {
			return n, err
		}
	}
}

// DefaultMaxSeen bounds the delivery ids a leaf remembers.
const DefaultMaxSeen = 100_000

// Seen is a leaf's persistent record of the delivery ids it has handled,
// so a redelivery (the acknowledgement was lost) is dropped. It keeps the
// most recent max ids.
type Seen struct {
	db  *bolt.DB
	max int
}

var (
	bucketSeen      = []byte("seen")
	bucketSeenOrder = []byte("seen-order")
)

// OpenSeen opens the record in dir (file leaf-seen.db).
func OpenSeen(dir string, max int) (*Seen, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mediator: %w", err)
	}
	db, err := bolt.Open(filepath.Join(dir, "leaf-seen.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("mediator: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketSeen); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketSeenOrder)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("mediator: %w", err)
	}
	return &Seen{db: db, max: max}, nil
}

// Close closes the record.
func (s *Seen) Close() error { return s.db.Close() }

// Has reports whether id was handled.
func (s *Seen) Has(id string) (bool, error) {
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketSeen).Get([]byte(id)) != nil
		return nil
	})
	return found, err
}

// Add records id, forgetting the oldest ids beyond the bound.
func (s *Seen) Add(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		sb, ob := tx.Bucket(bucketSeen), tx.Bucket(bucketSeenOrder)
		seq, err := ob.NextSequence()
		if err != nil {
			return err
		}
		key := make([]byte, 8)
		binary.BigEndian.PutUint64(key, seq)
		if err := ob.Put(key, []byte(id)); err != nil {
			return err
		}
		if err := sb.Put([]byte(id), key); err != nil {
			return err
		}
		// Ids leave only from the front of the order, so the count is
		// the span of sequence numbers left.
		for {
			k, v := ob.Cursor().First()
			if k == nil || seq-binary.BigEndian.Uint64(k)+1 <= uint64(s.max) {
				break
			}
			if err := sb.Delete(v); err != nil {
				return err
			}
			if err := ob.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// RegisterPush registers (or, with "", removes) the leaf's push endpoint
// with the mediator.
func (c *Client) RegisterPush(ctx context.Context, endpoint string) error {
	r, err := c.Request(ctx, TypePushRegister, PushRegisterBody{Endpoint: endpoint})
	if err != nil {
		return err
	}
	if r.Type != TypePushRegistered {
		return fmt.Errorf("mediator: unexpected answer %s", r.Type)
	}
	return nil
}
