package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
)

// Bounds of one backend connection.
const (
	// maxRelayMessage bounds one message read from the backend.
	maxRelayMessage = 1 << 20
	// subBuffer is the per-subscription queue between the reader and the
	// task that asked; the reader waits when it is full.
	subBuffer = 256
	// writeTimeout bounds one WebSocket write.
	writeTimeout = 10 * time.Second
)

// errBroken ends a session: the connection is unusable or the backend
// stopped answering; the gateway reconnects.
var errBroken = errors.New("backend connection broken")

// session is one WebSocket connection to the backend and the reader that
// routes its messages. Its owner is Gateway.runSession, which closes it.
type session struct {
	g  *Gateway
	ws *websocket.Conn

	wmu sync.Mutex // gorilla allows one writer at a time

	mu        sync.Mutex
	okWait    map[[32]byte]chan *nostr.RelayMessage
	subs      map[string]chan *nostr.RelayMessage
	notices   map[string]chan *nostr.RelayMessage // NEG sessions waiting, to learn "unsupported"
	challenge string
	authed    bool
	newAuth   chan struct{} // closed and replaced when a challenge arrives

	done    chan struct{} // closed when the reader stops
	readErr error

	// noNeg is set once the backend showed it does not speak NIP-77; only
	// the catch-up goroutine reads and writes it.
	noNeg bool
	// plain is set once the backend refused a filter with limit, since or
	// until (see refusal.go); set while the live REQ opens, then only the
	// catch-up goroutine reads and writes it.
	plain bool
}

func dialBackend(ctx context.Context, url string, timeout time.Duration) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := websocket.Dialer{HandshakeTimeout: timeout, ReadBufferSize: 4096, WriteBufferSize: 4096}
	ws, resp, err := d.DialContext(dctx, url, http.Header{})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: dial %s: %w", url, err)
	}
	ws.SetReadLimit(maxRelayMessage)
	return ws, nil
}

func newSession(g *Gateway, ws *websocket.Conn) *session {
	return &session{
		g:       g,
		ws:      ws,
		okWait:  make(map[[32]byte]chan *nostr.RelayMessage),
		subs:    make(map[string]chan *nostr.RelayMessage),
		notices: make(map[string]chan *nostr.RelayMessage),
		newAuth: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// read routes the backend's messages until the connection fails. live
// receives the live subscription's events; it runs in its own goroutine,
// owned by runSession.
func (s *session) read(ctx context.Context, live chan<- *nostr.Event) {
	defer close(s.done)
	for {
		_, data, err := s.ws.ReadMessage()
		if err != nil {
			s.readErr = err
			return
		}
		m, err := nostr.ParseRelayMessage(data)
		if err != nil {
			if !errors.Is(err, nostr.ErrUnknownType) {
				s.g.log.Warn("gateway: bad message from backend", "err", err)
			}
			continue
		}
		switch m.Type {
		case nostr.MsgEvent:
			if m.SubID == liveSub {
				s.g.in.add(m.Event.ID, m.Event.CreatedAt)
				select {
				case live <- m.Event:
				case <-ctx.Done():
					s.g.in.drop(m.Event.ID, m.Event.CreatedAt)
					return
				}
				continue
			}
			s.route(ctx, m)
		case nostr.MsgOK:
			s.mu.Lock()
			ch := s.okWait[m.EventID]
			s.mu.Unlock()
			if ch != nil {
				select {
				case ch <- m:
				default:
				}
			}
		case nostr.MsgAuth:
			s.mu.Lock()
			s.challenge = m.Text
			close(s.newAuth)
			s.newAuth = make(chan struct{})
			s.mu.Unlock()
		case nostr.MsgNotice:
			s.g.log.Info("gateway: backend notice", "notice", m.Text)
			s.mu.Lock()
			for _, ch := range s.notices {
				select {
				case ch <- m:
				default:
				}
			}
			s.mu.Unlock()
		default:
			if m.SubID == liveSub {
				if m.Type == nostr.MsgClosed || m.Type == nostr.MsgEOSE {
					s.route(ctx, m)
				}
				continue
			}
			s.route(ctx, m)
		}
	}
}

// route hands a message to the subscription that asked for it; messages
// for subscriptions nobody waits on any more are dropped.
func (s *session) route(ctx context.Context, m *nostr.RelayMessage) {
	s.mu.Lock()
	ch := s.subs[m.SubID]
	s.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- m:
	case <-ctx.Done():
	}
}

// send writes one message.
func (s *session) send(m nostr.ClientMessage) error {
	msg := m.AppendJSON(nil)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := s.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		return fmt.Errorf("%w: write: %v", errBroken, err)
	}
	return nil
}

// subscribe registers a subscription id for routing; the returned
// function unregisters it.
func (s *session) subscribe(id string) (<-chan *nostr.RelayMessage, func()) {
	return s.register(s.subs, id, subBuffer)
}

// watchNotices lets a NEG session learn that the backend answered with a
// NOTICE (what relays without NIP-77 do) instead of NEG-MSG.
func (s *session) watchNotices(id string) (<-chan *nostr.RelayMessage, func()) {
	return s.register(s.notices, id, 1)
}

func (s *session) register(m map[string]chan *nostr.RelayMessage, id string, size int) (<-chan *nostr.RelayMessage, func()) {
	ch := make(chan *nostr.RelayMessage, size)
	s.mu.Lock()
	m[id] = ch
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(m, id)
		s.mu.Unlock()
	}
}

// sendEvent publishes ev and waits for the backend's OK.
func (s *session) sendEvent(ctx context.Context, typ string, ev *nostr.Event) (*nostr.RelayMessage, error) {
	ch := make(chan *nostr.RelayMessage, 1)
	s.mu.Lock()
	s.okWait[ev.ID] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.okWait, ev.ID)
		s.mu.Unlock()
	}()
	if err := s.send(nostr.ClientMessage{Type: typ, Event: ev}); err != nil {
		return nil, err
	}
	t := time.NewTimer(s.g.s.PublishTimeout)
	defer t.Stop()
	select {
	case m := <-ch:
		return m, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: no OK for %s within %s", errBroken, ev.IDHex(), s.g.s.PublishTimeout)
	case <-s.done:
		return nil, fmt.Errorf("%w: %v", errBroken, s.readErr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// authenticate answers the backend's latest NIP-42 challenge with the
// backend key, waiting for a challenge if none came yet.
func (s *session) authenticate(ctx context.Context) error {
	s.mu.Lock()
	ch, wait := s.challenge, s.newAuth
	s.mu.Unlock()
	if ch == "" {
		t := time.NewTimer(s.g.s.PublishTimeout)
		defer t.Stop()
		select {
		case <-wait:
		case <-t.C:
			return fmt.Errorf("gateway: backend asked for AUTH but sent no challenge within %s", s.g.s.PublishTimeout)
		case <-s.done:
			return fmt.Errorf("%w: %v", errBroken, s.readErr)
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
		ch = s.challenge
		s.mu.Unlock()
	}
	ev := &nostr.Event{
		CreatedAt: time.Now().Unix(),
		Kind:      nostr.KindClientAuth,
		Tags:      nostr.Tags{{"relay", s.g.s.Backend}, {"challenge", ch}},
	}
	if err := s.g.key.Sign(ev); err != nil {
		return err
	}
	m, err := s.sendEvent(ctx, nostr.MsgAuth, ev)
	if err != nil {
		return err
	}
	if !m.OK {
		return fmt.Errorf("gateway: backend refused AUTH as %x: %s", ev.PubKey, m.Text)
	}
	s.mu.Lock()
	s.authed = true
	s.mu.Unlock()
	s.g.log.Info("gateway: authenticated to the backend", "pubkey", fmt.Sprintf("%x", ev.PubKey))
	return nil
}

// prefix is the machine-readable prefix of an OK or CLOSED message.
func prefix(text string) string {
	p, _, ok := strings.Cut(text, ":")
	if !ok {
		return ""
	}
	return p
}
