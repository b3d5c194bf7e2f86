package leaf

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/oob"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/invite"
	"fleetmesh.org/fleetmesh/nostr"
)

// Leaf is a leaf node. Its methods are safe for concurrent use; one wake
// runs at a time.
type Leaf struct {
	cfg      Config
	key      *identity.Key
	packer   *didcomm.Packer
	unpacker *didcomm.Unpacker
	db       *db
	verifier *nostr.Verifier
	progress progressMux

	mu     sync.Mutex
	ranker Ranker
	serve  bool          // SetServe
	wake   *Context      // the running wake's, nil between wakes
	idle   chan struct{} // closed when no wake runs
	closed bool

	wakeMu sync.Mutex // held for the whole of a wake
}

// New opens the leaf whose state is in cfg.Dir and whose key keys holds.
func New(cfg *Config, keys KeyStore) (l *Leaf, err error) {
	defer protect(&err)
	if cfg == nil || keys == nil {
		return nil, fmt.Errorf("leaf: New needs a Config (NewConfig) and a KeyStore")
	}
	c, err := cfg.filled()
	if err != nil {
		return nil, err
	}
	seed, err := keys.Seed()
	if err != nil {
		return nil, fmt.Errorf("leaf: key store: %w", err)
	}
	key, err := identity.KeyFromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("leaf: key store: %w", err)
	}
	secrets, err := didcomm.SecretsFromKey(key)
	if err != nil {
		return nil, err
	}
	d, err := openDB(c.Dir)
	if err != nil {
		return nil, err
	}
	res := didcomm.DIDKeyResolver{}
	idle := make(chan struct{})
	close(idle)
	return &Leaf{
		cfg:      c,
		key:      key,
		packer:   &didcomm.Packer{Secrets: secrets, Resolver: res},
		unpacker: &didcomm.Unpacker{Secrets: secrets, Resolver: res, Limits: didcomm.DefaultLimits()},
		db:       d,
		verifier: nostr.NewVerifier(1024),
		idle:     idle,
	}, nil
}

// DID is the leaf's did:key.
func (l *Leaf) DID() string { return l.key.DID() }

// SetProgress sets the callback for wake progress (nil for none).
func (l *Leaf) SetProgress(p Progress) {
	l.progress.mu.Lock()
	l.progress.p = p
	l.progress.mu.Unlock()
}

// SetRanker sets the rank function of EvictRanked; without one every
// event ranks by created_at.
func (l *Leaf) SetRanker(r Ranker) {
	l.mu.Lock()
	l.ranker = r
	l.mu.Unlock()
}

// SetServe is the app's decision whether the following wakes may serve
// the leaf's cached events to its homes (spec/leaf.md "Serving cached
// data"): an app allows it while the phone charges on an unmetered
// network, and forbids it otherwise. Off until called. Each wake reads it
// when it starts; what a wake serves is bounded by Config.ServeBytes.
func (l *Leaf) SetServe(allowed bool) {
	l.mu.Lock()
	l.serve = allowed
	l.mu.Unlock()
}

// Pair records a home node from its invitation: the join code
// `fleetmesh invite` prints (or its fleetmesh: link), or the out-of-band
// URL `fleetmesh didcomm invite` prints, or that invitation's JSON. Mediation
// is requested in the next wake. Pairing again with the same node only
// updates its endpoint.
func (l *Leaf) Pair(invitation string) (err error) {
	defer protect(&err)
	did, endpoint, err := parseInvitation(invitation)
	if err != nil {
		return err
	}
	relay, err := relayURL(endpoint)
	if err != nil {
		return err
	}
	return l.db.updateState(func(s *state) error {
		for i := range s.Homes {
			if s.Homes[i].DID == did {
				s.Homes[i].Endpoint, s.Homes[i].Relay = endpoint, relay
				return nil
			}
		}
		s.Homes = append(s.Homes, homeState{DID: did, Endpoint: endpoint, Relay: relay})
		return nil
	})
}

// parseInvitation reads either invitation a node prints: the join code of
// `fleetmesh invite` (fmjoin1…, or its fleetmesh: link), signed by the
// node and carrying its DIDComm endpoint, or the DIDComm out-of-band URL
// of `fleetmesh didcomm invite`. It returns the node's DID and endpoint.
func parseInvitation(invitation string) (did, endpoint string, err error) {
	if invite.IsCode(invitation) {
		inv, err := invite.Parse(invitation, time.Now())
		if err != nil {
			return "", "", fmt.Errorf("leaf: pair: %w", err)
		}
		if inv.Endpoint == "" {
			return "", "", fmt.Errorf("leaf: pair: the join code of %s carries no DIDComm endpoint (its node listened on no address another machine can dial): make one with `fleetmesh invite --endpoint http://HOST:PORT/didcomm`", inv.DID())
		}
		return inv.DID(), inv.Endpoint, nil
	}
	inv, body, err := oob.Parse(invitation)
	if err != nil {
		return "", "", fmt.Errorf("leaf: pair: %w (pair with the join code `fleetmesh invite` prints, or a `fleetmesh didcomm invite` URL)", err)
	}
	if _, err := identity.PublicKeyFromDID(inv.From); err != nil {
		return "", "", fmt.Errorf("leaf: pair: invitation from %q: %w", inv.From, err)
	}
	for _, s := range body.Services {
		u := s.ServiceEndpoint.URI
		if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			return inv.From, u, nil
		}
	}
	return "", "", fmt.Errorf("leaf: pair: the invitation from %s has no http(s) DIDComm endpoint in its services (pair with the join code `fleetmesh invite` prints instead)", inv.From)
}

// relayURL is the NIP-01 WebSocket of the node whose DIDComm endpoint is
// endpoint: a fleetmesh node serves both on one port (spec/leaf.md).
func relayURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("leaf: endpoint %q: %w", endpoint, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("leaf: endpoint %q is not http(s)", endpoint)
	}
	u.Path, u.RawQuery, u.Fragment = "/", "", ""
	return u.String(), nil
}

// Homes returns the paired home nodes as a JSON array.
func (l *Leaf) Homes() (out []byte, err error) {
	defer protect(&err)
	s, err := l.db.loadState()
	if err != nil {
		return nil, err
	}
	if s.Homes == nil {
		s.Homes = []homeState{}
	}
	return json.Marshal(s.Homes)
}

// Subscribe adds a NIP-01 filter (JSON) whose events the leaf keeps; the
// next wake catches it up. Subscribing again to the same filter is a
// no-op. A filter's limit is ignored: a subscription is all its events,
// within the store's bound.
func (l *Leaf) Subscribe(filterJSON string) (err error) {
	defer protect(&err)
	canon, err := canonicalFilter(filterJSON)
	if err != nil {
		return err
	}
	return l.db.updateState(func(s *state) error {
		for _, sub := range s.Subs {
			if sameFilter(sub.Filter, canon) {
				return nil
			}
		}
		s.Subs = append(s.Subs, subState{Filter: canon})
		return nil
	})
}

// Unsubscribe removes a filter; its stored events stay until evicted.
func (l *Leaf) Unsubscribe(filterJSON string) (err error) {
	defer protect(&err)
	canon, err := canonicalFilter(filterJSON)
	if err != nil {
		return err
	}
	return l.db.updateState(func(s *state) error {
		for i, sub := range s.Subs {
			if sameFilter(sub.Filter, canon) {
				s.Subs = append(s.Subs[:i], s.Subs[i+1:]...)
				return nil
			}
		}
		return nil
	})
}

// canonicalFilter parses a filter and re-encodes it without limit.
func canonicalFilter(s string) (json.RawMessage, error) {
	f, err := parseFilter([]byte(s))
	if err != nil {
		return nil, err
	}
	f.Limit, f.HasLimit = 0, false
	return json.Marshal(f)
}

func parseFilter(b []byte) (nostr.Filter, error) {
	var f nostr.Filter
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("leaf: invalid: filter: %w", err)
	}
	if f.Search != "" {
		return f, fmt.Errorf("leaf: invalid: a subscription cannot use search (NIP-50)")
	}
	return f, nil
}

// Publish stores a signed Nostr event (JSON) locally and in the outbox;
// the next wake sends it to a home node and keeps it until OK true. The
// app signs events with the user's key, which the leaf never holds.
func (l *Leaf) Publish(eventJSON []byte) (err error) {
	defer protect(&err)
	ev, err := l.checkEvent(eventJSON)
	if err != nil {
		return err
	}
	if _, err := l.db.putEvents([]*nostr.Event{ev}, l.rankFunc(), l.cfg.MaxStoreBytes, nil); err != nil {
		return err
	}
	return l.db.addOutbox(outboxEntry{Kind: outEvent, ID: ev.IDHex(), Data: ev.AppendJSON(nil)})
}

// checkEvent parses and verifies an event.
func (l *Leaf) checkEvent(raw []byte) (*nostr.Event, error) {
	ev := new(nostr.Event)
	if err := json.Unmarshal(raw, ev); err != nil {
		return nil, fmt.Errorf("leaf: invalid: event: %w", err)
	}
	if err := l.verifyEvent(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// verifyEvent checks a parsed event's id and signature.
func (l *Leaf) verifyEvent(ev *nostr.Event) error {
	if !ev.CheckID() {
		return fmt.Errorf("leaf: invalid: event id does not match its content")
	}
	if err := l.verifier.Verify(ev); err != nil {
		return fmt.Errorf("leaf: invalid: event signature: %w", err)
	}
	return nil
}

// SendMessage queues a DIDComm plaintext message (JSON; id, type and body
// at least) for the DID to: authcrypted now, sent by the next wake to that
// DID if it is a home node, else forwarded through the first home's
// mediator (which must mediate for to). It returns the message id.
func (l *Leaf) SendMessage(to string, plaintextJSON []byte) (id string, err error) {
	defer protect(&err)
	if _, err := identity.PublicKeyFromDID(to); err != nil {
		return "", fmt.Errorf("leaf: send to %q: %w", to, err)
	}
	var m didcomm.Message
	if err := json.Unmarshal(plaintextJSON, &m); err != nil {
		return "", fmt.Errorf("leaf: invalid: message: %w", err)
	}
	if m.Type == "" {
		return "", fmt.Errorf("leaf: invalid: message has no type")
	}
	if m.ID == "" {
		m.ID = didcomm.NewID()
	}
	if len(m.Body) == 0 {
		m.Body = json.RawMessage("{}")
	}
	if m.CreatedTime == 0 {
		m.CreatedTime = time.Now().Unix()
	}
	m.From, m.To = l.DID(), []string{to}
	packed, err := l.packer.Pack(&m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		return "", err
	}
	s, err := l.db.loadState()
	if err != nil {
		return "", err
	}
	if len(s.Homes) == 0 {
		return "", fmt.Errorf("leaf: pair with a home node first (Pair)")
	}
	via := s.Homes[0].DID
	for _, h := range s.Homes {
		if h.DID == to {
			via = to
		}
	}
	return m.ID, l.db.addOutbox(outboxEntry{Kind: outMessage, ID: m.ID, Data: packed, To: to, Via: via})
}

// SetPushEndpoint sets the UnifiedPush-style endpoint (an http(s) URL the
// app's push distributor gave it) that the home nodes POST a wake to when
// messages arrive; "" removes it. The next wake registers it.
func (l *Leaf) SetPushEndpoint(endpoint string) (err error) {
	defer protect(&err)
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("leaf: push endpoint %q is not an http(s) URL", endpoint)
		}
	}
	return l.db.updateState(func(s *state) error {
		s.Push = endpoint
		return nil
	})
}

// Messages returns up to limit picked-up messages after seq (0 for the
// first) as a JSON array of {seq, delivery_id, mediator, id, from,
// authenticated, message}.
func (l *Leaf) Messages(afterSeq int64, limit int64) (out []byte, err error) {
	defer protect(&err)
	if limit <= 0 {
		limit = 100
	}
	return l.db.messages(afterSeq, int(min(limit, 10_000)))
}

// DeleteMessage removes a message the app has handled.
func (l *Leaf) DeleteMessage(seq int64) (err error) {
	defer protect(&err)
	return l.db.deleteMessage(seq)
}

// Query returns the stored events matching a filter (JSON), newest
// first, as a JSON array; the filter's limit (default 500) bounds it.
func (l *Leaf) Query(filterJSON string) (out []byte, err error) {
	defer protect(&err)
	f, err := parseFilter([]byte(filterJSON))
	if err != nil {
		return nil, err
	}
	limit := 500
	if f.HasLimit {
		limit = f.Limit
	}
	var evs []*nostr.Event
	if err := l.db.eachEvent(&f, func(ev *nostr.Event) bool {
		evs = append(evs, ev)
		return true
	}); err != nil {
		return nil, err
	}
	sortNewestFirst(evs)
	if len(evs) > limit {
		evs = evs[:limit]
	}
	b := []byte{'['}
	for i, ev := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = ev.AppendJSON(b)
	}
	return append(b, ']'), nil
}

// Outbox returns the entries still waiting as a JSON array, and
// Rejected those a home refused for good (with the reason).
func (l *Leaf) Outbox() (out []byte, err error) {
	defer protect(&err)
	es, err := l.db.outbox("")
	if err != nil {
		return nil, err
	}
	if es == nil {
		es = []outboxEntry{}
	}
	return json.Marshal(es)
}

// Rejected returns the outbox entries a home node refused for good.
func (l *Leaf) Rejected() (out []byte, err error) {
	defer protect(&err)
	return l.db.rejected()
}

// StoreBytes is the size of the local event store.
func (l *Leaf) StoreBytes() (n int64, err error) {
	defer protect(&err)
	return l.db.storeBytes()
}

// Suspend stops the running wake, if any, and returns once it has
// closed every socket. Between wakes a leaf holds no socket, timer or
// goroutine, so after Suspend it sends nothing until the next Sync.
func (l *Leaf) Suspend() {
	l.mu.Lock()
	w, idle := l.wake, l.idle
	l.mu.Unlock()
	if w != nil {
		w.Cancel()
	}
	<-idle
}

// Close suspends the leaf and closes its database.
func (l *Leaf) Close() (err error) {
	defer protect(&err)
	l.Suspend()
	l.wakeMu.Lock()
	defer l.wakeMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	return l.db.close()
}

// rankFunc is the eviction rank of the configured rule.
func (l *Leaf) rankFunc() rankFunc {
	l.mu.Lock()
	r := l.ranker
	l.mu.Unlock()
	switch l.cfg.Eviction {
	case EvictFirstStored:
		return func(_ *nostr.Event, _ int, seq uint64) int64 { return int64(seq) }
	case EvictRanked:
		if r != nil {
			return func(ev *nostr.Event, size int, _ uint64) (rank int64) {
				defer func() {
					if recover() != nil {
						rank = ev.CreatedAt
					}
				}()
				return r.Rank(int64(ev.Kind), ev.CreatedAt, int64(size), ev.PubKeyHex())
			}
		}
	}
	return func(ev *nostr.Event, _ int, _ uint64) int64 { return ev.CreatedAt }
}
