package mediator

import (
	"encoding/json"
	"errors"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fmt"
	"sync/atomic"
	"time"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/routing"
)

// Config bounds a mediator.
type Config struct {
	// MaxLeaves is the most DIDs the mediator grants mediation to.
	MaxLeaves int
	// MaxRecipientsPerLeaf is the most recipient DIDs one leaf registers.
	MaxRecipientsPerLeaf int
	// MaxQueuedPerRecipient and MaxQueuedBytesPerRecipient bound one
	// recipient's queue; a forward beyond them is refused with
	// e.p.me.res.queue-full.
	MaxQueuedPerRecipient      int
	MaxQueuedBytesPerRecipient int64
	// MaxDeliveryBatch is the most messages in one delivery.
	MaxDeliveryBatch int
	// MaxForwardedBytes is the largest message accepted in a forward, and
	// MaxDeliveryBytes the most message bytes in one delivery: together
	// they keep a delivery, once encrypted (base64 adds a third), inside
	// didcomm.DefaultMaxMessageBytes.
	MaxForwardedBytes int
	MaxDeliveryBytes  int
	// PushInterval is the least time between two push wakes of one leaf
	// (push.go).
	PushInterval time.Duration
}

// DefaultConfig returns the default bounds.
func DefaultConfig() Config {
	return Config{
		MaxLeaves:                  10_000,
		MaxRecipientsPerLeaf:       16,
		MaxQueuedPerRecipient:      1_000,
		MaxQueuedBytesPerRecipient: 16 << 20,
		MaxDeliveryBatch:           100,
		MaxForwardedBytes:          256 << 10,
		MaxDeliveryBytes:           512 << 10,
		PushInterval:               PushInterval,
	}
}

// Mediator is the mediator side: it grants mediation, keeps the recipient
// lists, queues forwarded messages and serves pickup.
type Mediator struct {
	self  string
	cfg   Config
	store *store
	push  *pusher
	now   func() time.Time
	// queueGrant, if set, is asked before a forward is queued for a leaf
	// (SetQueueGrant).
	queueGrant atomic.Pointer[func(leaf string, queued int) error]
}

// SetQueueGrant sets the check asked before a forward is queued for a
// leaf, with the messages queued for the leaf now: an error refuses the
// forward with e.p.me.res.queue-full and the error's text (a grant of
// mediation queue size, spec/grants.md). Safe to call while serving.
func (m *Mediator) SetQueueGrant(f func(leaf string, queued int) error) {
	m.queueGrant.Store(&f)
}

// Open opens (or creates) the mediator state under dir for the DID self.
func Open(dir, self string, cfg Config) (*Mediator, error) {
	s, err := openStore(dir)
	if err != nil {
		return nil, err
	}
	if cfg.PushInterval <= 0 {
		cfg.PushInterval = PushInterval
	}
	return &Mediator{self: self, cfg: cfg, store: s, push: newPusher(s, cfg.PushInterval), now: time.Now}, nil
}

// Close stops the push wakes and closes the database.
func (m *Mediator) Close() error {
	m.push.close()
	return m.store.close()
}

// Mediates reports whether did holds a mediation grant here: it is a
// leaf of this node (package accounting lets it propose its receipts).
func (m *Mediator) Mediates(did string) bool {
	ok, err := m.store.hasGrant(did)
	return ok && err == nil
}

// Handles reports whether the mediator handles messages of this type.
func Handles(typ string) bool {
	switch typ {
	case routing.TypeForward, mediation.TypeMediateRequest, mediation.TypeRecipientUpdate, mediation.TypeRecipientQuery,
		mediation.TypeStatusRequest, mediation.TypeDeliveryRequest, mediation.TypeMessagesReceived, mediation.TypeLiveDeliveryChange,
		mediation.TypePushRegister:
		return true
	}
	return false
}

// Handle processes one unpacked message and returns the reply to send to
// its sender (nil when there is none). Errors are *didcomm.Problem values
// to be answered with a problem report.
func (m *Mediator) Handle(u *didcomm.Unpacked) (*didcomm.Message, error) {
	msg := u.Message
	if msg.Type == routing.TypeForward {
		return nil, m.forward(msg)
	}
	if !u.Authenticated {
		return nil, &didcomm.Problem{Code: didcomm.CodeUnauthorized, Err: fmt.Errorf("%s must come authenticated (authcrypt or signed)", msg.Type)}
	}
	leaf := msg.From
	if msg.Type == mediation.TypeMediateRequest {
		return m.mediateRequest(msg, leaf)
	}
	ok, err := m.store.hasGrant(leaf)
	if err != nil {
		return nil, internal(err)
	}
	if !ok {
		return nil, &didcomm.Problem{Code: didcomm.CodeUnauthorized, Err: fmt.Errorf("%s has no mediation grant: send mediate-request first", leaf)}
	}
	switch msg.Type {
	case mediation.TypeRecipientUpdate:
		return m.recipientUpdate(msg, leaf)
	case mediation.TypeRecipientQuery:
		rs, err := m.store.recipients(leaf)
		if err != nil {
			return nil, internal(err)
		}
		body := mediation.RecipientBody{Dids: []mediation.RecipientDID{}}
		for _, r := range rs {
			body.Dids = append(body.Dids, mediation.RecipientDID{RecipientDID: r})
		}
		return m.reply(msg, mediation.TypeRecipient, body)
	case mediation.TypeStatusRequest:
		return m.statusReply(msg, leaf)
	case mediation.TypeDeliveryRequest:
		return m.delivery(msg, leaf)
	case mediation.TypeMessagesReceived:
		var b mediation.MessagesReceivedBody
		if err := json.Unmarshal(msg.Body, &b); err != nil {
			return nil, malformed(err)
		}
		rs, err := m.store.recipients(leaf)
		if err != nil {
			return nil, internal(err)
		}
		if _, err := m.store.remove(rs, b.MessageIDList); err != nil {
			return nil, internal(err)
		}
		return m.statusReply(msg, leaf)
	case mediation.TypePushRegister:
		return m.pushRegister(msg, leaf)
	case mediation.TypeLiveDeliveryChange:
		return nil, &didcomm.Problem{Code: mediation.CodeLiveModeNotSupported, Err: errors.New("live delivery is not offered: poll with delivery-request")}
	}
	return nil, &didcomm.Problem{Code: didcomm.CodeUnsupportedType, Err: fmt.Errorf("mediator does not handle %s", msg.Type)}
}

func (m *Mediator) forward(msg *didcomm.Message) error {
	next, packed, err := routing.Unwrap(msg)
	if err != nil {
		return err
	}
	if len(packed) > m.cfg.MaxForwardedBytes {
		return &didcomm.Problem{Code: didcomm.CodeTooBig, Err: fmt.Errorf("forwarded message of %d bytes (at most %d)", len(packed), m.cfg.MaxForwardedBytes)}
	}
	recipient := didOf(next)
	owner, err := m.store.owner(recipient)
	if err != nil {
		return internal(err)
	}
	if owner == "" {
		return &didcomm.Problem{Code: didcomm.CodeUnauthorized, Err: fmt.Errorf("not mediating for %s", recipient)}
	}
	if f := m.queueGrant.Load(); f != nil && *f != nil {
		rs, err := m.store.recipients(owner)
		if err != nil {
			return internal(err)
		}
		n, err := m.store.queued(rs)
		if err != nil {
			return internal(err)
		}
		if err := (*f)(owner, n); err != nil {
			return &didcomm.Problem{Code: didcomm.CodeQueueFull, Err: err}
		}
	}
	q := queued{ID: didcomm.NewID(), Message: packed, Received: m.now().Unix()}
	if err := m.store.enqueue(recipient, q, m.cfg.MaxQueuedPerRecipient, m.cfg.MaxQueuedBytesPerRecipient); err != nil {
		if errors.Is(err, errLimit) {
			return &didcomm.Problem{Code: didcomm.CodeQueueFull, Err: err}
		}
		return internal(err)
	}
	m.push.wake(owner)
	return nil
}

func (m *Mediator) mediateRequest(msg *didcomm.Message, leaf string) (*didcomm.Message, error) {
	ok, err := m.store.addGrant(leaf, m.now(), m.cfg.MaxLeaves)
	if err != nil {
		return nil, internal(err)
	}
	if !ok {
		return m.reply(msg, mediation.TypeMediateDeny, struct{}{})
	}
	return m.reply(msg, mediation.TypeMediateGrant, mediation.GrantBody{RoutingDID: []string{m.self}})
}

func (m *Mediator) recipientUpdate(msg *didcomm.Message, leaf string) (*didcomm.Message, error) {
	var b mediation.RecipientUpdateBody
	if err := json.Unmarshal(msg.Body, &b); err != nil || len(b.Updates) == 0 {
		return nil, malformed(fmt.Errorf("recipient-update without updates"))
	}
	if len(b.Updates) > m.cfg.MaxRecipientsPerLeaf {
		return nil, &didcomm.Problem{Code: didcomm.CodeTooBig, Err: fmt.Errorf("%d updates (at most %d)", len(b.Updates), m.cfg.MaxRecipientsPerLeaf)}
	}
	resp := mediation.RecipientUpdateResponseBody{Updated: []mediation.UpdateResult{}}
	for _, u := range b.Updates {
		res, err := m.store.updateRecipient(leaf, didOf(u.RecipientDID), u.Action, m.cfg.MaxRecipientsPerLeaf)
		if err != nil {
			return nil, internal(err)
		}
		resp.Updated = append(resp.Updated, mediation.UpdateResult{RecipientDID: u.RecipientDID, Action: u.Action, Result: res})
	}
	return m.reply(msg, mediation.TypeRecipientUpdateResponse, resp)
}

// scope returns the recipients a pickup request covers: the one named, which
// must be the leaf's, or all of the leaf's.
func (m *Mediator) scope(leaf, named string) ([]string, error) {
	rs, err := m.store.recipients(leaf)
	if err != nil {
		return nil, internal(err)
	}
	if named == "" {
		return rs, nil
	}
	for _, r := range rs {
		if r == didOf(named) {
			return []string{r}, nil
		}
	}
	return nil, &didcomm.Problem{Code: didcomm.CodeUnauthorized, Err: fmt.Errorf("%s is not a recipient of %s", named, leaf)}
}

func (m *Mediator) statusReply(msg *didcomm.Message, leaf string) (*didcomm.Message, error) {
	var b struct {
		RecipientDID string `json:"recipient_did,omitempty"`
	}
	_ = json.Unmarshal(msg.Body, &b) // messages-received has no recipient_did
	rs, err := m.scope(leaf, b.RecipientDID)
	if err != nil {
		return nil, err
	}
	n, size, oldest, err := m.store.status(rs)
	if err != nil {
		return nil, internal(err)
	}
	return m.reply(msg, mediation.TypeStatus, mediation.StatusBody{RecipientDID: b.RecipientDID, MessageCount: n, TotalBytes: size, OldestReceivedTime: oldest, LiveDelivery: false})
}

func (m *Mediator) delivery(msg *didcomm.Message, leaf string) (*didcomm.Message, error) {
	var b mediation.DeliveryRequestBody
	if err := json.Unmarshal(msg.Body, &b); err != nil || b.Limit < 1 {
		return nil, malformed(fmt.Errorf("delivery-request needs a positive limit"))
	}
	limit := min(b.Limit, m.cfg.MaxDeliveryBatch)
	rs, err := m.scope(leaf, b.RecipientDID)
	if err != nil {
		return nil, err
	}
	qs, err := m.store.peek(rs, limit, m.cfg.MaxDeliveryBytes)
	if err != nil {
		return nil, internal(err)
	}
	if len(qs) == 0 {
		return m.reply(msg, mediation.TypeStatus, mediation.StatusBody{RecipientDID: b.RecipientDID, MessageCount: 0})
	}
	r, err := m.reply(msg, mediation.TypeDelivery, mediation.DeliveryBody{RecipientDID: b.RecipientDID})
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		r.Attachments = append(r.Attachments, didcomm.Attachment{ID: q.ID, MediaType: didcomm.MediaTypeEncrypted, Data: didcomm.AttachmentData{JSON: q.Message}})
	}
	return r, nil
}

func (m *Mediator) reply(to *didcomm.Message, typ string, body any) (*didcomm.Message, error) {
	r, err := didcomm.NewMessage(typ, body)
	if err != nil {
		return nil, internal(err)
	}
	r.From, r.To, r.Thid = m.self, []string{to.From}, to.Thread()
	return r, nil
}

func internal(err error) error { return &didcomm.Problem{Code: didcomm.CodeInternal, Err: err} }
func malformed(err error) error {
	return &didcomm.Problem{Code: didcomm.CodeMalformed, Err: err}
}

func didOf(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '#' || s[i] == '?' {
			return s[:i]
		}
	}
	return s
}
