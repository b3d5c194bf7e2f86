package relay

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/nostr"
)

// Store is what the relay needs from an event store. Package store
// implements it on Pebble; a server-class backend (PostgreSQL) would
// implement the same three calls with the same kind rules.
type Store interface {
	// Save stores an event durably. Stored and Duplicate mean it is on disk.
	Save(ctx context.Context, ev *nostr.Event) (eventstore.Result, error)
	// Query calls fn with matching events, newest first, at most limit.
	Query(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event) bool) error
	// Count counts matching events; approximate when a bound cut it short.
	Count(ctx context.Context, f *nostr.Filter) (n int64, approximate bool, err error)
}

// RejectFunc is a policy hook: it returns a non-empty reason, which must
// start with a NIP-01 prefix such as "blocked: ", to refuse an event.
type RejectFunc func(ctx context.Context, ev *nostr.Event) (reason string)

// Origin says where an event came from, so hooks can avoid sending an
// event back where it came from.
type Origin int

// Origins.
const (
	FromClient   Origin = iota // published by a client of this relay
	FromMesh                   // handed in by the mesh
	FromBackend                // handed in by a gateway from its private backend
	FromFrontEnd               // stored by another front-end sharing this node's store (Deliver)
)

// Relay is a Nostr relay. Its hook slices must be set before it serves.
type Relay struct {
	cfg   Config
	store Store
	log   *slog.Logger
	// verifier checks every event's signature, caching parsed author keys.
	verifier *nostr.Verifier
	m        *metrics
	now      func() time.Time

	// RejectEvent policies run, in order, on every event before it is
	// stored, after its signature is verified: one a client publishes, and
	// one the mesh hands in (AddEvent: a sync, GossipSub, a REQ's lookup),
	// so a node's bans and policy hold whatever way an event comes.
	RejectEvent []RejectFunc
	// Lookup, if set, asks the mesh for events matching a filter that this
	// node may not hold. What it finds is admitted and stored as AddEvent
	// does, and the REQ answers from the store with it, newest first,
	// before EOSE (lookup.go). It must return once ctx ends; the relay
	// gives it Config.LookupTimeout. fn is never called concurrently.
	Lookup func(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event))
	// Interest, if set, is told of every live subscription a client opens,
	// so that the node can ask the mesh for the events it will want (the
	// seed's "what its own clients subscribe to"). The release it returns is
	// called once when the subscription ends: CLOSE, a REQ that reuses its
	// id, or the connection closing. It runs under the connection's lock,
	// so it must not block.
	Interest func(filters []nostr.Filter) (release func())
	// OnStored hooks run after an event is durably stored (or, for an
	// ephemeral event, accepted for delivery), with where it came from.
	OnStored []func(ev *nostr.Event, from Origin)
	// Identify, if set, names the party a WebSocket connection speaks
	// for, from its upgrade request ("" leaves it anonymous). When it
	// returns false it has answered the request (a refusal) and the
	// relay does not upgrade. The node checks a leaf's DPoP proof here
	// (spec/leaf.md "Metering the relay connection").
	Identify func(w http.ResponseWriter, req *http.Request) (party string, ok bool)
	// Served, if set, is told of every event queued to, and every event
	// accepted (OK true) from, a connection Identify named: sent says
	// which way, n is the event's JSON bytes as framed. It runs on the
	// connection's goroutines and must not block.
	Served func(party string, sent bool, n int)
	// RefuseClient, if set, is asked about every WebSocket upgrade with
	// the client's address (behind trusted proxies, the one they
	// forwarded for); a non-empty answer, with its NIP-01 prefix,
	// refuses the connection with 403. The operator's blocked addresses
	// (package manage) are checked here.
	RefuseClient func(client string) (reason string)
	// Manage, if set, serves the relay management API (NIP-86): POST
	// requests to the relay URL with Content-Type
	// application/nostr+json+rpc. It does its own authorization.
	Manage http.Handler
	// FeedHead, if set, says the store is shared by several front-ends
	// and live delivery comes from its change feed: it returns the
	// feed's last committed position. Stored events then reach live
	// subscriptions, and the OnStored hooks, only through Deliver, which
	// the front-end following the feed calls for every event, this
	// relay's own included.
	FeedHead func(ctx context.Context) (uint64, error)
	// Broadcast, set with FeedHead, puts an ephemeral event on the feed
	// for every front-end, this one too (Deliver), without storing it.
	Broadcast func(ctx context.Context, ev *nostr.Event) error

	// info holds the NIP-11 name, description and icon the operator set
	// at run time (SetInfo), over the configured ones.
	info atomic.Pointer[Info]
	// feedOrigins are where events this relay stored came from, until
	// the feed delivers them (FeedHead set).
	feedOrigins feedOrigins

	upgrader websocket.Upgrader
	// corkBufs holds the buffers corked connections collect a batch of
	// frames in (see Listener).
	corkBufs sync.Pool
	addrs    *addrLimits
	gate     *gate
	newConns *clientaddr.Buckets // per address (Config.IPConnsPerSecond)
	// buffered counts the bytes queued in every connection's send queue
	// (Config.MaxBufferedBytes).
	buffered atomic.Int64
	// fanout delivers stored events to live subscriptions.
	fanout *fanout
	// refusals are the reasons of refusals a flood repeats, formatted
	// once.
	refusals struct{ subsConn, subsAddr string }

	mu    sync.RWMutex
	conns map[*conn]struct{}
	// nconns is len(conns), read without mu: a live delivery, which
	// runs under mu's read lock, asks it, and a second read lock there
	// would deadlock with a writer waiting between the two.
	nconns atomic.Int64
	done   chan struct{}
	wg     sync.WaitGroup
}

// New makes a relay on a store. reg receives the relay's Prometheus metrics
// (nil: not registered).
func New(cfg Config, st Store, log *slog.Logger, reg prometheus.Registerer) *Relay {
	cfg.Fill()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	files, err := RaiseFileLimit()
	if err != nil {
		log.Warn("relay: file limit", "err", err)
	}
	cfg.files = files
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = files.Conns
	}
	log.Info("relay: connection budget", "budget", files.String(), "max_connections", cfg.MaxConns, "max_connections_per_ip", cfg.MaxConnsPerIP)
	m := newMetrics(reg)
	r := &Relay{
		cfg:      cfg,
		store:    meteredStore{st},
		log:      log,
		verifier: nostr.NewVerifier(cfg.VerifierKeys),
		m:        m,
		now:      time.Now,
		conns:    make(map[*conn]struct{}),
		done:     make(chan struct{}),
	}
	r.fanout = newFanout(r)
	r.refusals.subsConn = fmt.Sprintf("blocked: this connection has %d open subscriptions, the relay's limit; CLOSE one first", cfg.MaxSubscriptions)
	r.refusals.subsAddr = fmt.Sprintf("blocked: your address has %d open subscriptions, the relay's limit; CLOSE some first", cfg.IPMaxSubscriptions)
	r.addrs = newAddrLimits(&r.cfg)
	r.newConns = clientaddr.NewBuckets(cfg.IPConnsPerSecond, max(1, int(cfg.IPConnsPerSecond*4)), maxTrackedAddrs)
	r.gate = newGate(&r.cfg, m)
	r.corkBufs.New = func() any { return new([]byte) }
	r.upgrader = websocket.Upgrader{
		ReadBufferSize:  4096,
		WriteBufferSize: 4096,
		// Write buffers are taken from a pool only while a message is being
		// written, so idle connections hold none.
		WriteBufferPool: &sync.Pool{},
		// A relay is a public service: any web origin may connect.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	return r
}

// FileBudget is the split of the file limit the relay's caps were derived
// from; the node gives the mesh its share.
func (r *Relay) FileBudget() FileBudget { return r.cfg.files }

// Config returns the relay's effective configuration.
func (r *Relay) Config() Config { return r.cfg }

// ServeHTTP serves WebSocket upgrades as Nostr connections, NIP-11 to
// requests that accept application/nostr+json, and a short text page
// otherwise.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case websocket.IsWebSocketUpgrade(req):
		r.serveWebSocket(w, req)
	case r.Manage != nil && isManagement(req):
		r.Manage.ServeHTTP(w, req)
	case strings.Contains(req.Header.Get("Accept"), "application/nostr+json"):
		r.serveNIP11(w, req)
	case req.Method == http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Headers", "*")
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(r.cfg.Name + "\n\nThis is a Nostr relay. Connect with a Nostr client over WebSocket,\nor ask for its NIP-11 document with Accept: application/nostr+json.\n"))
	}
}

// isManagement reports whether req is a NIP-86 call: a POST whose media
// type is application/nostr+json+rpc (parameters such as a charset are
// allowed).
func isManagement(req *http.Request) bool {
	if req.Method != http.MethodPost {
		return false
	}
	ct, _, _ := strings.Cut(req.Header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "application/nostr+json+rpc")
}

// Info is what the operator may change of the relay's NIP-11 document at
// run time (NIP-86 changerelayname, changerelaydescription,
// changerelayicon). An empty field keeps the configured value.
type Info struct {
	Name, Description, Icon string
}

// SetInfo sets the NIP-11 name, description and icon over the configured
// ones; empty fields keep them.
func (r *Relay) SetInfo(i Info) { r.info.Store(&i) }

// CloseClients closes the connections of every client for which match
// (given the client's address as RefuseClient is) is true, and returns how
// many it closed. Their in-flight saves finish first, as at shutdown.
func (r *Relay) CloseClients(match func(client string) bool) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	for c := range r.conns {
		if match(c.client) {
			c.shutdown()
			n++
		}
	}
	return n
}

// refuseUpgrade answers a WebSocket upgrade the relay will not take, with
// Retry-After, and closes the connection so its descriptor is freed.
func refuseUpgrade(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	w.Header().Set("Connection", "close")
	http.Error(w, msg, status)
}

func (r *Relay) serveWebSocket(w http.ResponseWriter, req *http.Request) {
	client := r.cfg.TrustedProxies.Client(req.RemoteAddr, req.Header)
	if r.RefuseClient != nil {
		if reason := r.RefuseClient(client); reason != "" {
			r.m.rejected.WithLabelValues("client_refused").Inc()
			http.Error(w, reason, http.StatusForbidden)
			return
		}
	}
	k := clientaddr.Of(client)
	if ok, _ := r.newConns.Allow(k.Narrow); !ok {
		r.m.rejected.WithLabelValues("conn_rate_ip").Inc()
		refuseUpgrade(w, http.StatusTooManyRequests, fmt.Sprintf("rate-limited: this relay takes at most %g new connections a second from one address; retry later", r.cfg.IPConnsPerSecond))
		return
	}
	if !r.addrs.openConn(k) {
		r.m.rejected.WithLabelValues("conns_per_ip").Inc()
		refuseUpgrade(w, http.StatusTooManyRequests, fmt.Sprintf("rate-limited: this relay takes at most %d connections from one address; close some or retry later", r.cfg.MaxConnsPerIP))
		return
	}
	party := ""
	if r.Identify != nil {
		var ok bool
		if party, ok = r.Identify(w, req); !ok {
			r.addrs.closeConn(k)
			r.m.rejected.WithLabelValues("identify").Inc()
			return
		}
	}
	r.mu.Lock()
	full := len(r.conns) >= r.cfg.MaxConns
	r.mu.Unlock()
	if full {
		r.addrs.closeConn(k)
		r.m.rejected.WithLabelValues("conns_total").Inc()
		refuseUpgrade(w, http.StatusServiceUnavailable, "error: this relay is at its connection limit; retry later")
		return
	}
	ws, err := r.upgrader.Upgrade(w, req, nil)
	if err != nil {
		r.addrs.closeConn(k)
		return
	}
	c := newConn(r, ws, k, req.Host)
	c.party = party
	c.client = client
	r.mu.Lock()
	select {
	case <-r.done:
		r.mu.Unlock()
		ws.Close()
		r.addrs.closeConn(k)
		return
	default:
	}
	r.conns[c] = struct{}{}
	r.nconns.Add(1)
	r.wg.Add(1)
	r.mu.Unlock()
	r.m.conns.Inc()
	go func() {
		defer r.wg.Done()
		c.serve()
		r.mu.Lock()
		delete(r.conns, c)
		r.nconns.Add(-1)
		r.mu.Unlock()
		// What the writer left queued is dropped with the connection; no
		// broadcast reaches it any more.
		r.buffered.Add(-c.queued.Swap(0))
		r.m.conns.Dec()
		r.addrs.closeConn(k)
	}()
}

// AddEvent stores an event that arrived from elsewhere (the mesh, the
// gateway) and delivers it to this relay's live subscribers. The event's
// signature is verified here too: nothing unverified is stored. The
// RejectEvent policies refuse it as they would a client's, with a
// *RefusedError; the store applies the kind rules (NIP-09, replaceable
// precedence, NIP-40) and says so in the Result.
func (r *Relay) AddEvent(ctx context.Context, ev *nostr.Event, from Origin) (eventstore.Result, error) {
	if err := r.verifier.Verify(ev); err != nil {
		return 0, err
	}
	if reason := r.refuse(WithOrigin(ctx, from), ev); reason != "" {
		return 0, &RefusedError{Reason: reason}
	}
	return r.accept(ctx, ev, from)
}

type originKey struct{}

// WithOrigin returns ctx as a RejectEvent policy is given it for an event
// from the given origin (OriginOf reads it back).
func WithOrigin(ctx context.Context, from Origin) context.Context {
	return context.WithValue(ctx, originKey{}, from)
}

// OriginOf tells a RejectEvent policy where the event it is asked about
// came from: a client of this relay (the default), the mesh or a backend.
func OriginOf(ctx context.Context) Origin {
	if o, ok := ctx.Value(originKey{}).(Origin); ok {
		return o
	}
	return FromClient
}

// RefusedError is AddEvent's refusal by a RejectEvent policy.
type RefusedError struct {
	// Reason is the policy's reason, with its NIP-01 prefix.
	Reason string
}

func (e *RefusedError) Error() string { return e.Reason }

// refuse runs the RejectEvent policies on ev; it returns the first
// refusal's reason, or "".
func (r *Relay) refuse(ctx context.Context, ev *nostr.Event) string {
	for _, policy := range r.RejectEvent {
		if reason := policy(ctx, ev); reason != "" {
			r.m.rejected.WithLabelValues("policy").Inc()
			return reason
		}
	}
	return ""
}

// accept stores (or, if ephemeral, only delivers) a verified, admitted event.
func (r *Relay) accept(ctx context.Context, ev *nostr.Event, from Origin) (eventstore.Result, error) {
	res := eventstore.Stored
	ephemeral := nostr.ClassOf(ev.Kind) == nostr.Ephemeral
	fed := r.FeedHead != nil && (!ephemeral || r.Broadcast != nil)
	if fed {
		// Remembered before the save: the feed may deliver the event
		// before Save returns.
		r.feedOrigins.put(ev.ID, from)
	}
	if ephemeral && fed {
		if err := r.Broadcast(ctx, ev); err != nil {
			r.feedOrigins.take(ev.ID)
			r.m.rejected.WithLabelValues("store_error").Inc()
			return res, err
		}
	} else if !ephemeral {
		start := time.Now()
		var err error
		res, err = r.store.Save(ctx, ev)
		r.m.saveSeconds.Observe(time.Since(start).Seconds())
		if fed && (err != nil || res != eventstore.Stored) {
			r.feedOrigins.take(ev.ID)
		}
		if err != nil {
			r.m.rejected.WithLabelValues("store_error").Inc()
			return res, err
		}
	}
	r.m.stored.WithLabelValues(res.String()).Inc()
	if fed {
		// The feed brings it back to every front-end, this one too
		// (Deliver), with its hooks.
		return res, nil
	}
	if res == eventstore.Stored {
		// Live delivery runs off the publisher's path: its OK does not
		// wait for every matching subscription to be written to.
		r.fanout.add(ev, 0, nil)
		for _, h := range r.OnStored {
			h(ev, from)
		}
	}
	return res, nil
}

// Shutdown stops accepting connections' messages, closes every connection
// and waits for in-flight saves to finish, so nothing acknowledged is lost.
func (r *Relay) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	for c := range r.conns {
		c.shutdown()
	}
	r.mu.Unlock()
	waited := make(chan struct{})
	go func() {
		r.wg.Wait()
		r.fanout.wait()
		close(waited)
	}()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
