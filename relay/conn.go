package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/negentropy"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/workbudget"
)

// conn is one client connection. The read loop owns parsing and ordering;
// EVENT, REQ and COUNT work runs in goroutines the conn waits for before it
// closes, so an EVENT being saved when the client leaves is still saved.
type conn struct {
	r         *Relay
	ws        *websocket.Conn
	addr      clientaddr.Key
	host      string
	challenge string
	// party is whom Relay.Identify named ("": anonymous).
	party string
	// client is the client's address as Relay.RefuseClient was given it.
	client string

	send chan outFrame
	// answerRoom holds a token for each stored result in send: stored
	// answers may fill send only up to its capacity, so the rest of the
	// queue stays free for live events (see storedSlots).
	answerRoom chan struct{}
	writerDone chan struct{}
	ctx        context.Context
	cancel     context.CancelFunc
	limiter    *rate.Limiter
	// invalid bounds the malformed, oversized and binary messages a
	// connection may send; past it the connection is closed.
	invalid  *rate.Limiter
	inflight chan struct{}
	handlers sync.WaitGroup
	stopping atomic.Bool
	// queued counts the bytes in send (Config.MaxBufferedBytes).
	queued atomic.Int64
	work   connWork

	mu     sync.Mutex
	subs   map[string]*subscription
	negs   map[string]*negentropy.Responder
	authed map[[32]byte]struct{}
}

type subscription struct {
	filters []nostr.Filter
	cancel  context.CancelFunc
	release func() // from Relay.Interest; nil if none
	unslot  func() // gives the address's subscription slot back
	// opened is the fan-out's number when the subscription opened: it is
	// given live only events queued after (fanout.seq).
	opened uint64
	// absorbed are the events its stored answer sent and those its own
	// lookups stored (lookup.go): they are not given to it live as well.
	// live are the events given to it live while its stored part runs,
	// which that part then leaves out; nil once EOSE is sent. absorbed
	// is dropped once the delivery passes trimAt, the position at EOSE:
	// no later event can be one the stored answer read. All guarded by
	// the connection's mu; the maps are nil until needed.
	absorbed map[[32]byte]struct{}
	live     map[[32]byte]struct{}
	eosed    bool
	trimAt   uint64
	// With a shared store's feed (Relay.FeedHead), heads are each
	// filter's snapshot position (rawHeadQuerier) once its stored part
	// has run, exact once every filter's is known: an event of the feed
	// at or before a filter's head was there for its stored part to
	// find, so it is not given live for that filter, even when the
	// filter's limit left it out or this front-end's feed reaches it
	// late. Until EOSE such events wait in pending (at most
	// maxPendingLive; past that they go out live as they come).
	heads   []uint64
	exact   bool
	pending []pendingLive
}

// pendingLive is an event of the feed at position pos that reached a
// subscription while its stored part ran.
type pendingLive struct {
	ev  *nostr.Event
	pos uint64
}

// maxPendingLive bounds the feed's events one subscription holds back
// while its stored part runs.
const maxPendingLive = 1024

// fresh reports whether a feed event at pos matching ev is new to s: at
// a position past the head of a filter it matches, whose stored part
// could not have found it. Without exact heads every event is. The
// connection's mu is held.
func (s *subscription) fresh(ev *nostr.Event, pos uint64) bool {
	if !s.exact || pos == 0 {
		return true
	}
	for i := range s.filters {
		if pos > s.heads[i] && s.filters[i].Matches(ev) {
			return true
		}
	}
	return false
}

// claim says whether the stored part may send the event id: not when
// the live part already has. It remembers that the stored part did.
func (c *conn) claim(s *subscription, id [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, sent := s.live[id]; sent {
		return false
	}
	if s.absorbed == nil {
		s.absorbed = make(map[[32]byte]struct{})
	}
	s.absorbed[id] = struct{}{}
	return true
}

// storedDone marks the end of s's stored part at feed position pos, its
// filters' snapshot heads as given (exact when every one is known), and
// returns the feed's events that reached it meanwhile and are new to it,
// for the caller to send after EOSE.
func (c *conn) storedDone(s *subscription, pos uint64, heads []uint64, exact bool) []*nostr.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.eosed, s.live, s.trimAt = true, nil, pos
	s.heads, s.exact = heads, exact
	var out []*nostr.Event
	for _, p := range s.pending {
		if _, own := s.absorbed[p.ev.ID]; !own && s.fresh(p.ev, p.pos) {
			out = append(out, p.ev)
		}
	}
	s.pending = nil
	return out
}

// end stops the subscription and tells the Interest hook it is gone.
func (s *subscription) end() {
	s.cancel()
	if s.release != nil {
		s.release()
	}
	if s.unslot != nil {
		s.unslot()
	}
}

func newConn(r *Relay, ws *websocket.Conn, addr clientaddr.Key, host string) *conn {
	var chal [16]byte
	rand.Read(chal[:])
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		r:          r,
		ws:         ws,
		addr:       addr,
		host:       host,
		challenge:  hex.EncodeToString(chal[:]),
		send:       make(chan outFrame, r.cfg.SendQueue),
		answerRoom: make(chan struct{}, storedSlots(r.cfg.SendQueue)),
		writerDone: make(chan struct{}),
		ctx:        ctx,
		cancel:     cancel,
		inflight:   make(chan struct{}, r.cfg.MaxInFlight),
		subs:       make(map[string]*subscription),
		negs:       make(map[string]*negentropy.Responder),
		authed:     make(map[[32]byte]struct{}),
		work:       connWork{b: workbudget.New(r.cfg.ReqMillisPerSecond, r.cfg.ReqRowsPerSecond, r.cfg.largestWork())},
	}
	c.invalid = rate.NewLimiter(invalidPerSecond, invalidBurst)
	if r.cfg.EventsPerSecond > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(r.cfg.EventsPerSecond), r.cfg.EventsBurst)
	}
	return c
}

// A connection may send invalidBurst malformed, oversized or binary
// messages, and invalidPerSecond more each second; one that sends more is
// not a client with a bug (nor a conformance suite trying every malformed
// frame it knows) but a flood, and is closed. An address may send
// ipInvalidBurst and ipInvalidPerSecond over all its connections, so that
// reconnecting does not buy a flood a fresh allowance. A message over the
// size limit counts as oversizedWeight, for the bytes it makes the relay
// read and drop.
const (
	invalidPerSecond   = 2
	invalidBurst       = 100
	ipInvalidPerSecond = 10
	ipInvalidBurst     = 200
	oversizedWeight    = 10
)

// badMessage counts an invalid message and reports whether the
// connection may go on.
func (c *conn) badMessage() bool { return c.badMessages(1) }

// badMessages counts n invalid messages' worth (an oversized message is
// worth several) and reports whether the connection may go on; if not,
// it says why and cuts the connection.
func (c *conn) badMessages(n int) bool {
	now := time.Now()
	if c.invalid.AllowN(now, n) && c.r.addrs.allowInvalid(c.addr, now, n) {
		return true
	}
	c.r.m.rejected.WithLabelValues("invalid_flood").Inc()
	c.notice("error: too many invalid messages; closing the connection")
	c.cancel()
	return false
}

// hardReadLimit is where a message is too large even to skip politely: the
// connection is closed rather than reading more.
func (c *conn) hardReadLimit() int64 { return int64(c.r.cfg.MaxMessageBytes) * 8 }

func (c *conn) serve() {
	go c.writer()
	c.ws.SetReadLimit(c.hardReadLimit())
	deadline := 3 * c.r.cfg.PingInterval
	// Until its first message, a connection has FirstMessageTimeout, and
	// pongs do not extend it: a socket that only answers pings holds a
	// slot for nothing.
	c.ws.SetReadDeadline(time.Now().Add(min(deadline, c.r.cfg.FirstMessageTimeout.Duration)))
	var spoke atomic.Bool
	// extend pushes the read deadline out, unless the conn is stopping:
	// shutdown's deadline in the past must not be undone by a message or a
	// pong that arrives after it.
	extend := func() error {
		if c.stopping.Load() {
			return c.ws.SetReadDeadline(time.Now())
		}
		return c.ws.SetReadDeadline(time.Now().Add(deadline))
	}
	c.ws.SetPongHandler(func(string) error {
		if !spoke.Load() {
			return nil
		}
		return extend()
	})
	c.sendCtl(encode(nostr.RelayMessage{Type: nostr.MsgAuth, Text: c.challenge}))
	// The read buffer grows to the largest message this connection sent
	// (at most the limit), so an idle connection holds almost nothing.
	var buf bytes.Buffer
	limit := int64(c.r.cfg.MaxMessageBytes)
	for {
		typ, rd, err := c.ws.NextReader()
		if err != nil {
			break
		}
		// A connection being cut (a flood of invalid messages, a slow
		// consumer) stops reading here, even with messages buffered.
		if c.stopping.Load() || c.ctx.Err() != nil {
			break
		}
		spoke.Store(true)
		extend()
		buf.Reset()
		n, err := buf.ReadFrom(io.LimitReader(rd, limit+1))
		if err != nil {
			break
		}
		if n > limit {
			// The message is longer than the limit: skip the rest of it.
			rest, _ := io.Copy(io.Discard, rd)
			c.r.m.rejected.WithLabelValues("message_too_large").Inc()
			c.notice(fmt.Sprintf("invalid: message of %d bytes is over this relay's limit of %d bytes", n+rest, c.r.cfg.MaxMessageBytes))
			if !c.badMessages(oversizedWeight) {
				break
			}
			continue
		}
		if typ != websocket.TextMessage {
			c.notice("invalid: only text messages carry Nostr messages")
			if !c.badMessage() {
				break
			}
			continue
		}
		if !c.handle(bytes.Clone(buf.Bytes())) {
			break
		}
	}
	c.cancel()
	c.handlers.Wait()
	c.mu.Lock()
	for id, s := range c.subs {
		s.end()
		delete(c.subs, id)
		c.r.m.subs.Dec()
	}
	for id := range c.negs {
		delete(c.negs, id)
		c.r.addrs.closeNeg(c.addr)
	}
	c.mu.Unlock()
	<-c.writerDone
	c.ws.Close()
}

// shutdown makes the read loop stop; the conn then finishes its in-flight
// work and closes.
func (c *conn) shutdown() {
	c.stopping.Store(true)
	c.ws.SetReadDeadline(time.Now())
}

// A writer on a corked connection (see Relay.Listener) sends a message and
// the ones already queued behind it in one write, at most batchMessages or
// about batchBytes at once, so that the write deadline set for each message
// still bounds how long one write may take.
const (
	batchMessages = 64
	batchBytes    = 64 << 10
)

func (c *conn) writer() {
	defer close(c.writerDone)
	ping := time.NewTicker(c.r.cfg.PingInterval)
	defer ping.Stop()
	write := func(f []byte) bool {
		c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return c.ws.WriteMessage(websocket.TextMessage, f) == nil
	}
	// A TLS or other wrapper above the corkConn hides it: such a
	// connection is written message by message.
	cc, corkable := c.ws.UnderlyingConn().(*corkConn)
	// send writes f, batched with what is queued now. It never waits for
	// more to arrive: a lone OK goes out at once.
	send := func(f []byte) bool {
		if !corkable {
			return write(f)
		}
		cc.cork()
		ok := write(f)
		// The saves of one store commit finish together and their
		// goroutines queue their OKs one after the other; yielding once
		// lets those already runnable queue theirs before the flush.
		// Without it, on a busy machine this goroutine woke on the first
		// OK and wrote nearly every OK on its own.
		runtime.Gosched()
	queued:
		for n, size := 1, len(f); ok && n < batchMessages && size < batchBytes; n++ {
			select {
			case o := <-c.send:
				f = c.took(o)
				size += len(f)
				ok = write(f)
			default:
				break queued
			}
		}
		return cc.uncork() == nil && ok
	}
	for {
		select {
		case o := <-c.send:
			if !send(c.took(o)) {
				c.cancel()
				c.ws.SetReadDeadline(time.Now())
				return
			}
		case <-ping.C:
			c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second))
		case <-c.ctx.Done():
			// Flush what is queued (OKs of events that were saved), then
			// say goodbye.
			for {
				select {
				case o := <-c.send:
					if !send(c.took(o)) {
						return
					}
				default:
					c.ws.WriteControl(websocket.CloseMessage,
						websocket.FormatCloseMessage(websocket.CloseGoingAway, ""), time.Now().Add(time.Second))
					return
				}
			}
		}
	}
}

// An outFrame is one message in a connection's send queue.
type outFrame struct {
	b []byte
	// answer marks a stored result, which holds a token of answerRoom
	// until the writer takes it.
	answer bool
}

// storedSlots is how much of a send queue of n messages a REQ's stored
// answer may fill. The rest is kept for live events: a client reading a
// large answer more slowly than the store produces it (any client over a
// real network, or on a loopback slower than the relay) has its queue full
// of the answer, and a live event for any of its subscriptions arriving
// then would find no room and cut it as a slow consumer, though it is
// reading. Only live events that pile up past the kept room cut it.
func storedSlots(n int) int { return max(1, n-n/4) }

// queuing counts f as buffered before it enters the send queue.
func (c *conn) queuing(f []byte) {
	c.queued.Add(int64(len(f)))
	c.r.buffered.Add(int64(len(f)))
}

// unqueued undoes queuing for a frame that did not enter the queue.
func (c *conn) unqueued(f []byte) { c.unbuffered(f) }

// took counts o, taken off the send queue by the writer, as no longer
// buffered (and gives back its answer token), and returns its bytes.
func (c *conn) took(o outFrame) []byte {
	c.unbuffered(o.b)
	if o.answer {
		<-c.answerRoom
	}
	return o.b
}

// unbuffered takes f's bytes off the connection's and the relay's counts.
func (c *conn) unbuffered(f []byte) {
	c.queued.Add(-int64(len(f)))
	c.r.buffered.Add(-int64(len(f)))
}

// overBuffered says whether queuing f would pass Config.MaxBufferedBytes
// while this connection holds more than its fair share of it: only such
// a connection is cut, so one slow reader cannot make the relay refuse
// everyone.
func (c *conn) overBuffered(f []byte) bool {
	limit := c.r.cfg.MaxBufferedBytes
	if c.r.buffered.Load()+int64(len(f)) <= limit {
		return false
	}
	n := max(1, c.r.nconns.Load())
	return c.queued.Load() > limit/n
}

// sendCtl queues a reply (OK, EOSE, CLOSED, NOTICE), waiting for room: a
// slow client slows only itself. Replies are small and never refused for
// the buffer cap, so no OK is lost to it.
func (c *conn) sendCtl(f []byte) bool {
	c.queuing(f)
	select {
	case c.send <- outFrame{b: f}:
		return true
	case <-c.writerDone:
		c.unqueued(f)
		return false
	}
}

// bufferCutKey holds, in a REQ's context, a flag that sendCtx sets when
// it refused a result for the buffer cap, so the REQ ends with CLOSED.
type bufferCutKey struct{}

// sendCtx is sendCtl for stored results: it also gives up when ctx ends
// (a closed REQ), and when the connection is over its share of the buffer
// cap.
func (c *conn) sendCtx(ctx context.Context, f []byte) bool {
	if c.overBuffered(f) {
		c.r.m.rejected.WithLabelValues("buffer_cap").Inc()
		if cut, ok := ctx.Value(bufferCutKey{}).(*atomic.Bool); ok {
			cut.Store(true)
		}
		return false
	}
	return c.sendAnswer(ctx, f)
}

// sendAnswer queues f as part of a REQ's stored answer, after the results
// before it, giving up only when ctx ends. The answer's EOSE goes this way:
// it is a reply, never refused for the buffer cap, or a client whose last
// result pushed its queue over its share would wait for it forever.
func (c *conn) sendAnswer(ctx context.Context, f []byte) bool {
	select {
	case c.answerRoom <- struct{}{}:
	case <-ctx.Done():
		return false
	case <-c.writerDone:
		return false
	}
	c.queuing(f)
	select {
	case c.send <- outFrame{b: f, answer: true}:
		return true
	case <-ctx.Done():
	case <-c.writerDone:
	}
	c.unqueued(f)
	<-c.answerRoom
	return false
}

// sendEvent is sendCtx for an EVENT frame of subscription subID, told to
// the Served hook once queued.
func (c *conn) sendEvent(ctx context.Context, subID string, f []byte) bool {
	if !c.sendCtx(ctx, f) {
		return false
	}
	c.served(subID, f)
	return true
}

// served tells the Served hook of an EVENT frame queued to an identified
// connection, with the event's bytes (the frame less `["EVENT",`, the
// subscription id and `,` `]`).
func (c *conn) served(subID string, f []byte) {
	if c.party == "" || c.r.Served == nil {
		return
	}
	c.r.Served(c.party, true, len(f)-len(`["EVENT",,]`)-len(nostr.AppendString(nil, subID)))
}

// sendLive queues a live event of subscription subID without waiting; a
// client whose queue is full, or who holds more than its share of the
// buffer cap, is too slow to follow live traffic and is disconnected
// rather than silently missing events.
func (c *conn) sendLive(subID string, f []byte) {
	if !c.overBuffered(f) {
		c.queuing(f)
		select {
		case c.send <- outFrame{b: f}:
			c.served(subID, f)
			return
		default:
			c.unqueued(f)
		}
	}
	c.r.m.rejected.WithLabelValues("slow_consumer").Inc()
	c.cancel()
	c.ws.SetReadDeadline(time.Now())
}

// refuseSub answers a REQ refused for a subscription cap with CLOSED and
// counts it as an invalid message: a client told "blocked" that keeps
// asking is flooding, and is closed like one, so that a burst of refused
// REQs costs the relay a bounded number of replies per connection.
func (c *conn) refuseSub(subID, metric, reason string) {
	c.r.m.rejected.WithLabelValues(metric).Inc()
	c.closed(subID, reason)
	c.badMessage()
}

func (c *conn) notice(msg string) {
	c.sendCtl(encode(nostr.RelayMessage{Type: nostr.MsgNotice, Text: msg}))
}

func (c *conn) ok(id [32]byte, accepted bool, msg string) {
	c.sendCtl(encode(nostr.RelayMessage{Type: nostr.MsgOK, EventID: id, OK: accepted, Text: msg}))
}

func (c *conn) closed(subID, msg string) {
	c.sendCtl(encode(nostr.RelayMessage{Type: nostr.MsgClosed, SubID: subID, Text: msg}))
}

func (c *conn) negErr(subID, reason string) {
	c.sendCtl(encode(nostr.RelayMessage{Type: nostr.MsgNegErr, SubID: subID, Text: reason}))
}

// handle serves one message; it returns false when the connection must
// close.
func (c *conn) handle(data []byte) bool {
	m, err := nostr.ParseClientMessage(data)
	if err != nil {
		var pe *nostr.ParseError
		errors.As(err, &pe)
		c.r.m.rejected.WithLabelValues("malformed").Inc()
		switch {
		case pe != nil && pe.EventID != "":
			// EventID is set only to a well-formed id, so it decodes.
			var id [32]byte
			nostr.DecodeHex(id[:], pe.EventID)
			c.ok(id, false, "invalid: "+pe.Err.Error())
		case pe != nil && pe.SubID != "" && (pe.Type == nostr.MsgReq || pe.Type == nostr.MsgCount):
			c.closed(pe.SubID, "invalid: "+pe.Err.Error())
		case pe != nil && pe.SubID != "" && (pe.Type == nostr.MsgNegOpen || pe.Type == nostr.MsgNegMsg):
			c.negErr(pe.SubID, "invalid: "+pe.Err.Error())
		default:
			c.notice("invalid: " + err.Error())
		}
		return c.badMessage()
	}
	switch m.Type {
	case nostr.MsgEvent:
		c.handleEvent(m.Event, len(data))
	case nostr.MsgReq:
		c.handleReq(m)
	case nostr.MsgCount:
		c.handleCount(m)
	case nostr.MsgClose:
		c.mu.Lock()
		if s, ok := c.subs[m.SubID]; ok {
			s.end()
			delete(c.subs, m.SubID)
			c.r.m.subs.Dec()
		}
		c.mu.Unlock()
	case nostr.MsgAuth:
		c.handleAuth(m.Event)
	case nostr.MsgNegOpen, nostr.MsgNegMsg, nostr.MsgNegClose:
		c.handleNeg(m)
	}
	return true
}

// encode frames m in one allocation sized for a typical message of its
// kind.
func encode(m nostr.RelayMessage) []byte {
	return m.AppendJSON(make([]byte, 0, 96+len(m.SubID)+len(m.Text)+len(m.NegMsg)))
}
