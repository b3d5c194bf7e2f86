package leaf

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/dpop"
	"fleetmesh.org/fleetmesh/nostr"
)

// Bounds of a relay connection.
const (
	// maxRelayMessage bounds one message read from a home relay.
	maxRelayMessage = 1 << 20
	// subQueue is the per-subscription queue between the reader and the
	// task that asked; the reader waits when it is full.
	subQueue = 256
)

// errNoNegentropy means the relay does not do NIP-77 (or refused this
// filter with NEG-ERR): the catch-up falls back to since windows.
var errNoNegentropy = errors.New("relay does not do NIP-77 for this filter")

// relayConn is one WebSocket to a home relay, owned by the wake that
// dialed it, with one reader goroutine that close stops.
type relayConn struct {
	w   *wake
	url string
	// home is the home node's DID; metered says the home took the
	// leaf's DPoP proof, so both sides count what this connection
	// carries (spec/leaf.md "Metering the relay connection").
	home    string
	metered bool
	ws      *websocket.Conn
	wmu     sync.Mutex

	mu      sync.Mutex
	subs    map[string]chan *inbound
	oks     map[string]chan *inbound
	notices []chan *inbound

	done      chan struct{}
	quit      chan struct{} // closed by close: the reader stops waiting on queues
	readErr   error
	stop      func() bool
	closeOnce sync.Once
	nextSub   int
}

// inbound is a message from the relay; for an EVENT, size is the event's
// JSON bytes as framed, what the home counts as sent.
type inbound struct {
	*nostr.RelayMessage
	size int
}

// dialRelay opens a WebSocket to home i's relay on a fresh counted
// connection, with a DPoP proof naming the leaf when the home mediates
// for it. A home that refuses the proof (401: a clock too far off, or
// the home no longer mediates for the leaf) is dialled again without
// one: that connection is anonymous and neither side counts it.
func (w *wake) dialRelay(ctx context.Context, i int) (*relayConn, error) {
	// Only these two fields: the DIDComm part writes others meanwhile.
	relay, did := w.st.Homes[i].Relay, w.st.Homes[i].DID
	if w.proofs[i] {
		rc, status, err := w.dialRelayOnce(ctx, relay, true)
		if status != http.StatusUnauthorized {
			if rc != nil {
				rc.home, rc.metered = did, true
			}
			return rc, err
		}
	}
	rc, _, err := w.dialRelayOnce(ctx, relay, false)
	if rc != nil {
		rc.home = did
	}
	return rc, err
}

// dialRelayOnce dials url, with a DPoP proof if proof is set, and
// returns the refusal's HTTP status if the upgrade was refused. The
// connection lives until close or the end of ctx.
func (w *wake) dialRelayOnce(ctx context.Context, url string, proof bool) (*relayConn, int, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	// gorilla's handshake heeds only the context's deadline, not its
	// cancellation: closing the socket on cancel ends it at once.
	var unwatch func() bool
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := w.dial(ctx, network, addr)
		if err == nil {
			unwatch = context.AfterFunc(dctx, func() { c.Close() })
		}
		return c, err
	}
	d := websocket.Dialer{
		NetDialContext:   dial,
		HandshakeTimeout: dialTimeout,
		ReadBufferSize:   4096,
		WriteBufferSize:  4096,
	}
	header := http.Header{}
	if proof {
		p, err := dpop.Proof(w.l.key, http.MethodGet, url, time.Now())
		if err != nil {
			return nil, 0, err
		}
		header.Set(dpop.Header, p)
	}
	w.counter.rtts.Add(1)
	ws, resp, err := d.DialContext(dctx, url, header)
	status := 0
	if resp != nil {
		status = resp.StatusCode
		if resp.Body != nil {
			resp.Body.Close()
		}
	}
	if unwatch != nil && !unwatch() && err == nil {
		ws.Close() // cancelled as the handshake ended
		err = dctx.Err()
	}
	if err != nil {
		return nil, status, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(maxRelayMessage)
	rc := &relayConn{w: w, url: url, ws: ws, subs: make(map[string]chan *inbound), oks: make(map[string]chan *inbound), done: make(chan struct{}), quit: make(chan struct{})}
	// Cancelling the wake closes the socket, which ends the reader and
	// every wait at once.
	rc.stop = context.AfterFunc(ctx, func() { ws.NetConn().Close() })
	go rc.read()
	return rc, 0, nil
}

// close ends the connection and its reader; it may be called again.
func (rc *relayConn) close() {
	rc.closeOnce.Do(func() {
		rc.stop()
		close(rc.quit)
		rc.wmu.Lock()
		_ = rc.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(100*time.Millisecond))
		rc.wmu.Unlock()
		rc.ws.Close()
	})
	<-rc.done
}

// alive reports whether the connection's reader still runs.
func (rc *relayConn) alive() bool {
	select {
	case <-rc.done:
		return false
	case <-rc.quit:
		return false
	default:
		return true
	}
}

func (rc *relayConn) read() {
	defer close(rc.done)
	for {
		_, data, err := rc.ws.ReadMessage()
		if err != nil {
			rc.readErr = err
			return
		}
		pm, err := nostr.ParseRelayMessage(data)
		if err != nil {
			continue // a home that sends a malformed message gets it ignored
		}
		m := &inbound{RelayMessage: pm}
		if m.Type == nostr.MsgEvent {
			m.size = len(data) - len(`["EVENT",,]`) - len(nostr.AppendString(nil, m.SubID))
		}
		switch m.Type {
		case nostr.MsgEvent, nostr.MsgEOSE, nostr.MsgClosed, nostr.MsgNegMsg, nostr.MsgNegErr:
			rc.deliver(rc.subs, m.SubID, m)
		case nostr.MsgOK:
			rc.deliver(rc.oks, hex.EncodeToString(m.EventID[:]), m)
		case nostr.MsgNotice:
			rc.mu.Lock()
			ns := rc.notices
			rc.mu.Unlock()
			for _, ch := range ns {
				select {
				case ch <- m:
				default:
				}
			}
		}
	}
}

// deliver hands m to the waiter for key, waiting while its queue is full.
func (rc *relayConn) deliver(waiters map[string]chan *inbound, key string, m *inbound) {
	rc.mu.Lock()
	ch := waiters[key]
	rc.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- m:
	case <-rc.quit:
	case <-rc.w.ctx.Done():
	}
}

func (rc *relayConn) send(m nostr.ClientMessage) error {
	b := m.AppendJSON(nil)
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	_ = rc.ws.SetWriteDeadline(time.Now().Add(exchangeTimeout))
	if err := rc.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		return fmt.Errorf("write to %s: %w", rc.url, err)
	}
	return nil
}

// subscribe registers a subscription id and returns its queue.
func (rc *relayConn) subscribe(prefix string) (string, chan *inbound, func()) {
	rc.mu.Lock()
	rc.nextSub++
	id := prefix + "-" + strconv.Itoa(rc.nextSub)
	ch := make(chan *inbound, subQueue)
	rc.subs[id] = ch
	rc.mu.Unlock()
	return id, ch, func() {
		rc.mu.Lock()
		delete(rc.subs, id)
		rc.mu.Unlock()
	}
}

// watchNotices returns a queue of NOTICEs, for a NIP-77 session on a
// relay that may answer NEG-OPEN with a NOTICE.
func (rc *relayConn) watchNotices() (chan *inbound, func()) {
	ch := make(chan *inbound, 4)
	rc.mu.Lock()
	rc.notices = append(rc.notices, ch)
	rc.mu.Unlock()
	return ch, func() {
		rc.mu.Lock()
		for i, c := range rc.notices {
			if c == ch {
				rc.notices = append(rc.notices[:i], rc.notices[i+1:]...)
				break
			}
		}
		rc.mu.Unlock()
	}
}

// await waits for the next message on ch (or a NOTICE on notices, which
// may be nil) within exchangeTimeout.
func (rc *relayConn) await(ch, notices chan *inbound) (*inbound, error) {
	t := time.NewTimer(exchangeTimeout)
	defer t.Stop()
	select {
	case m := <-ch:
		return m, nil
	case m := <-notices:
		return m, nil
	case <-rc.done:
		return nil, fmt.Errorf("connection to %s: %v", rc.url, rc.readErr)
	case <-rc.w.ctx.Done():
		return nil, rc.w.ctx.Err()
	case <-t.C:
		rc.w.counter.stalls.Add(1)
		rc.ws.NetConn().Close() // a silent path is dead: the next try dials anew
		return nil, fmt.Errorf("%s sent nothing within %s", rc.url, exchangeTimeout)
	}
}

// request runs one REQ to EOSE and hands each event, with its size as
// framed, to fn. A relay that
// closes it as rate-limited, naming when to retry ("… retry in 3s", as
// spec/limits.md's query budgets do), is asked again after that wait while
// the wake's deadline leaves room, up to maxRateLimitRetries times; fn may
// then see an event twice, which the leaf's store ignores.
func (rc *relayConn) request(f nostr.Filter, fn func(ev *nostr.Event, size int) error) error {
	for try := 0; ; try++ {
		err := rc.requestOnce(f, fn)
		var rl *rateLimited
		if !errors.As(err, &rl) || try >= maxRateLimitRetries {
			return err
		}
		if dl, ok := rc.w.ctx.Deadline(); ok && time.Until(dl) < rl.wait+exchangeTimeout/4 {
			return err
		}
		t := time.NewTimer(rl.wait)
		select {
		case <-rc.w.ctx.Done():
			t.Stop()
			return err
		case <-rc.done:
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// maxRateLimitRetries bounds the retries of one rate-limited REQ.
const maxRateLimitRetries = 3

// rateLimited is a REQ a relay closed as rate-limited; wait is the delay
// it named, or a second when it named none.
type rateLimited struct {
	url, reason string
	wait        time.Duration
}

func (e *rateLimited) Error() string {
	return fmt.Sprintf("%s closed the subscription: %s", e.url, e.reason)
}

// retryIn matches the delay a refusal names.
var retryIn = regexp.MustCompile(`retry in ([0-9]+(?:\.[0-9]+)?(?:ms|s|m))`)

// closedError is the error of a CLOSED with reason: a *rateLimited for a
// rate-limited one.
func (rc *relayConn) closedError(reason string) error {
	if !strings.HasPrefix(reason, "rate-limited:") {
		return fmt.Errorf("%s closed the subscription: %s", rc.url, reason)
	}
	wait := time.Second
	if m := retryIn.FindStringSubmatch(reason); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil && d > 0 {
			wait = min(d, 10*time.Second)
		}
	}
	return &rateLimited{url: rc.url, reason: reason, wait: wait}
}

func (rc *relayConn) requestOnce(f nostr.Filter, fn func(ev *nostr.Event, size int) error) error {
	id, ch, unsub := rc.subscribe("req")
	defer unsub()
	rc.w.counter.rtts.Add(1)
	if err := rc.send(nostr.ClientMessage{Type: nostr.MsgReq, SubID: id, Filters: []nostr.Filter{f}}); err != nil {
		return err
	}
	for {
		m, err := rc.await(ch, nil)
		if err != nil {
			return err
		}
		switch m.Type {
		case nostr.MsgEvent:
			if err := fn(m.Event, m.size); err != nil {
				return err
			}
		case nostr.MsgEOSE:
			_ = rc.send(nostr.ClientMessage{Type: nostr.MsgClose, SubID: id})
			return nil
		case nostr.MsgClosed:
			return rc.closedError(m.Text)
		}
	}
}

// publish sends events and hands each one's OK to settle. At most window
// EVENTs are outstanding at once.
func (rc *relayConn) publish(evs []*nostr.Event, window int, settle func(i int, ok bool, reason string) error) error {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.IDHex()
	}
	ch := make(chan *inbound, len(ids))
	rc.mu.Lock()
	for _, id := range ids {
		rc.oks[id] = ch
	}
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		for _, id := range ids {
			delete(rc.oks, id)
		}
		rc.mu.Unlock()
	}()
	pos := map[string]int{}
	for i, id := range ids {
		pos[id] = i
	}
	sent, got := 0, 0
	for got < len(ids) {
		for sent < len(ids) && sent-got < window {
			rc.w.counter.rtts.Add(1)
			if err := rc.send(nostr.ClientMessage{Type: nostr.MsgEvent, Event: evs[sent]}); err != nil {
				return err
			}
			sent++
		}
		m, err := rc.await(ch, nil)
		if err != nil {
			return err
		}
		id := hex.EncodeToString(m.EventID[:])
		i, ok := pos[id]
		if !ok {
			continue // a second OK for the same event
		}
		delete(pos, id)
		got++
		if err := settle(i, m.OK, m.Text); err != nil {
			return err
		}
	}
	return nil
}
