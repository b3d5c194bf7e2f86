package manage

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Options configure the API.
type Options struct {
	// Admins are the Nostr keys that may call the API. None: every call
	// is refused with 403, and the API says how to list one.
	Admins [][32]byte
	// AuthWindow is how far a NIP-98 event's created_at may be from this
	// node's clock (0: DefaultAuthWindow).
	AuthWindow time.Duration
	// MaxBodyBytes bounds a request body (0: DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Delete removes banned events from the store.
	Delete func(ctx context.Context, ids [][32]byte) (int, error)
	// Release stores an event the operator allowed out of the moderation
	// queue (its JSON); nil leaves held events unstored.
	Release func(ctx context.Context, evJSON []byte) error
	// Used remembers the authorizations already used (nil: this
	// process's memory, up to maxSeenAuth). Front-ends sharing one
	// database share it (pgstore.ManageLists), so an authorization used
	// at one is refused at every other.
	Used AuthMemory
	// Log, if set, records every change an admin makes.
	Log *slog.Logger
	// Metrics, if set, counts calls.
	Metrics *Metrics
}

// DefaultAuthWindow is NIP-98's "reasonable window" for created_at.
const DefaultAuthWindow = 60 * time.Second

// DefaultMaxBodyBytes bounds a NIP-86 request body.
const DefaultMaxBodyBytes = 64 << 10

// maxSeenAuth bounds the replay cache of authorization event ids.
const maxSeenAuth = 10_000

// AuthMemory remembers the NIP-98 authorization events already used, so
// that none is accepted twice.
type AuthMemory interface {
	// Use records id, an authorization made at made, and reports whether
	// it was not recorded before. It may forget ids made more than window
	// before now: CheckAuth refuses those anyway.
	Use(ctx context.Context, id [32]byte, made, now time.Time, window time.Duration) (fresh bool, err error)
}

// memoryAuth is an AuthMemory in this process's memory, bounded by
// maxSeenAuth.
type memoryAuth struct {
	mu   sync.Mutex
	seen map[[32]byte]time.Time // NIP-98 event ids used, until they go stale
}

// Use implements AuthMemory. When it holds maxSeenAuth ids still fresh it
// refuses every new one until some age out.
func (m *memoryAuth) Use(_ context.Context, id [32]byte, made, now time.Time, window time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, used := m.seen[id]; used {
		return false, nil
	}
	if len(m.seen) >= maxSeenAuth {
		for k, t := range m.seen {
			if now.Sub(t) > window {
				delete(m.seen, k)
			}
		}
		if len(m.seen) >= maxSeenAuth {
			return false, nil
		}
	}
	m.seen[id] = made
	return true, nil
}

// API serves NIP-86 over the lists.
type API struct {
	l      *Lists
	o      Options
	admins map[[32]byte]struct{}
	now    func() time.Time
}

// NewAPI makes the API over l.
func NewAPI(l *Lists, o Options) *API {
	if o.AuthWindow <= 0 {
		o.AuthWindow = DefaultAuthWindow
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Used == nil {
		o.Used = &memoryAuth{seen: map[[32]byte]time.Time{}}
	}
	a := &API{l: l, o: o, admins: map[[32]byte]struct{}{}, now: time.Now}
	for _, k := range o.Admins {
		a.admins[k] = struct{}{}
	}
	return a
}

// Request is a NIP-86 call.
type Request struct {
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

// Response is a NIP-86 answer: a result, or an error message.
type Response struct {
	Result any    `json:"result"`
	Error  string `json:"error,omitempty"`
}

// methods is every method the API supports, as supportedmethods lists them.
var methods = []string{
	"supportedmethods",
	"banpubkey", "unbanpubkey", "listbannedpubkeys",
	"allowpubkey", "unallowpubkey", "listallowedpubkeys",
	"listeventsneedingmoderation", "allowevent", "banevent", "unbanevent", "listbannedevents", "listallowedevents",
	"changerelayname", "changerelaydescription", "changerelayicon",
	"allowkind", "disallowkind", "listallowedkinds", "listdisallowedkinds",
	"blockip", "unblockip", "listblockedips",
}

// ServeHTTP answers one NIP-86 call.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Content-Type", "application/nostr+json+rpc")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.o.MaxBodyBytes))
	if err != nil {
		a.answer(w, http.StatusRequestEntityTooLarge, "", Response{Error: fmt.Sprintf("invalid: request body over %d bytes", a.o.MaxBodyBytes)})
		return
	}
	ev, err := CheckAuth(r.Header.Get("Authorization"), r.Method, RequestURL(r), body, a.now(), a.o.AuthWindow)
	if err != nil {
		w.Header().Set("WWW-Authenticate", "Nostr")
		a.answer(w, http.StatusUnauthorized, "", Response{Error: "auth-required: " + err.Error()})
		return
	}
	if _, ok := a.admins[ev.PubKey]; !ok {
		msg := errNotAdmin.Error()
		if len(a.admins) == 0 {
			msg = "forbidden: this relay lists no admins; add your pubkey (hex) to [manage] admins in config.toml and restart"
		}
		a.answer(w, http.StatusForbidden, "", Response{Error: msg})
		return
	}
	fresh, err := a.o.Used.Use(r.Context(), ev.ID, time.Unix(ev.CreatedAt, 0), a.now(), a.o.AuthWindow)
	if err != nil {
		a.answer(w, http.StatusServiceUnavailable, "", Response{Error: "error: checking whether this authorization was used before failed; try again: " + err.Error()})
		return
	}
	if !fresh {
		w.Header().Set("WWW-Authenticate", "Nostr")
		a.answer(w, http.StatusUnauthorized, "", Response{Error: "auth-required: this authorization event was already used; sign a fresh one for each request"})
		return
	}
	req, err := DecodeRequest(body)
	if err != nil {
		a.answer(w, http.StatusBadRequest, "", Response{Error: "invalid: " + err.Error()})
		return
	}
	res, err := a.call(r.Context(), req)
	if err != nil {
		a.answer(w, http.StatusOK, req.Method, Response{Error: err.Error()})
		return
	}
	a.o.Log.Info("manage: call", "method", req.Method, "admin", hex.EncodeToString(ev.PubKey[:]))
	a.answer(w, http.StatusOK, req.Method, Response{Result: res})
}

func (a *API) answer(w http.ResponseWriter, status int, method string, resp Response) {
	if a.o.Metrics != nil {
		a.o.Metrics.call(method, status, resp.Error != "")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(resp)
}

// RequestURL is the URL a client names in a NIP-98 u tag for r, as far
// as the node can know it: the Host it was sent to and the path. The
// scheme is not compared (SameURL).
func RequestURL(r *http.Request) string {
	u := *r.URL
	u.Scheme = "http"
	u.Host = r.Host
	return u.String()
}

// DecodeRequest decodes a NIP-86 request body.
func DecodeRequest(body []byte) (Request, error) {
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("body is not a JSON object {\"method\":...,\"params\":[...]}: %v", err)
	}
	if req.Method == "" {
		return req, errors.New("body has no method")
	}
	return req, nil
}

func (req Request) str(i int, name string, optional bool) (string, error) {
	if i >= len(req.Params) {
		if optional {
			return "", nil
		}
		return "", fmt.Errorf("invalid: %s needs its %s as parameter %d", req.Method, name, i+1)
	}
	var s string
	if err := json.Unmarshal(req.Params[i], &s); err != nil {
		return "", fmt.Errorf("invalid: %s's parameter %d (%s) must be a string", req.Method, i+1, name)
	}
	return s, nil
}

func (req Request) hex32(i int, name string) ([32]byte, error) {
	s, err := req.str(i, name, false)
	if err != nil {
		return [32]byte{}, err
	}
	b, err := ParseHex32(s)
	if err != nil {
		return b, fmt.Errorf("invalid: %s: %v", req.Method, err)
	}
	return b, nil
}

// keyReason reads a pubkey or event id and an optional reason, the
// parameters of the ban and allow methods.
func (req Request) keyReason(name string) ([32]byte, string, error) {
	k, err := req.hex32(0, name)
	if err != nil {
		return k, "", err
	}
	reason, err := req.str(1, "reason", true)
	return k, reason, err
}

func (req Request) kind(i int) (int, error) {
	if i >= len(req.Params) {
		return 0, fmt.Errorf("invalid: %s needs a kind as parameter %d", req.Method, i+1)
	}
	var n json.Number
	if err := json.Unmarshal(req.Params[i], &n); err != nil {
		var s string
		if json.Unmarshal(req.Params[i], &s) != nil {
			return 0, fmt.Errorf("invalid: %s's kind must be a number", req.Method)
		}
		n = json.Number(s)
	}
	k, err := strconv.Atoi(n.String())
	if err != nil || k < 0 || k > 65535 {
		return 0, fmt.Errorf("invalid: %s's kind must be an integer from 0 to 65535", req.Method)
	}
	return k, nil
}

// pubkeyReason and idReason are NIP-86's list rows.
type pubkeyReason struct {
	Pubkey string `json:"pubkey"`
	Reason string `json:"reason,omitempty"`
}
type idReason struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}
type ipReason struct {
	IP     string `json:"ip"`
	Reason string `json:"reason,omitempty"`
}

func rows[T any](es []Entry, err error, mk func(Entry) T) (any, error) {
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(es))
	for _, e := range es {
		out = append(out, mk(e))
	}
	return out, nil
}

// call runs one method. Errors are the caller's (a bad parameter, a full
// list) or the database's; both are answered in the error field.
func (a *API) call(ctx context.Context, req Request) (any, error) {
	l := a.l
	switch req.Method {
	case "supportedmethods":
		return methods, nil
	case "banpubkey", "allowpubkey":
		pk, reason, err := req.keyReason("pubkey")
		if err != nil {
			return nil, err
		}
		if req.Method == "banpubkey" {
			return true, l.BanPubkey(ctx, pk, reason)
		}
		return true, l.AllowPubkey(ctx, pk, reason)
	case "unbanpubkey", "unallowpubkey":
		pk, err := req.hex32(0, "pubkey")
		if err != nil {
			return nil, err
		}
		if req.Method == "unbanpubkey" {
			_, err = l.UnbanPubkey(ctx, pk)
		} else {
			_, err = l.UnallowPubkey(ctx, pk)
		}
		return true, err
	case "listbannedpubkeys", "listallowedpubkeys":
		b := ListBannedPubkeys
		if req.Method == "listallowedpubkeys" {
			b = ListAllowedPubkeys
		}
		es, err := l.list(ctx, b)
		return rows(es, err, func(e Entry) pubkeyReason { return pubkeyReason{e.Key, e.Reason} })
	case "banevent":
		id, reason, err := req.keyReason("event id")
		if err != nil {
			return nil, err
		}
		if err := l.BanEvent(ctx, id, reason); err != nil {
			return nil, err
		}
		if a.o.Delete != nil {
			if _, err := a.o.Delete(ctx, [][32]byte{id}); err != nil {
				return nil, fmt.Errorf("error: banned, but removing it from the store failed: %v", err)
			}
		}
		return true, nil
	case "unbanevent":
		id, err := req.hex32(0, "event id")
		if err != nil {
			return nil, err
		}
		_, err = l.UnbanEvent(ctx, id)
		return true, err
	case "allowevent":
		id, reason, err := req.keyReason("event id")
		if err != nil {
			return nil, err
		}
		held, err := l.AllowEvent(ctx, id, reason)
		if err != nil {
			return nil, err
		}
		if held != nil && a.o.Release != nil {
			var h heldEvent
			if err := json.Unmarshal(held, &h); err != nil {
				return nil, fmt.Errorf("error: held event unreadable: %v", err)
			}
			if err := a.o.Release(ctx, h.Event); err != nil {
				return nil, fmt.Errorf("error: allowed, but storing the held event failed: %v", err)
			}
		}
		return true, nil
	case "listbannedevents", "listallowedevents":
		b := ListBannedEvents
		if req.Method == "listallowedevents" {
			b = ListAllowedEvents
		}
		es, err := l.list(ctx, b)
		return rows(es, err, func(e Entry) idReason { return idReason{e.Key, e.Reason} })
	case "listeventsneedingmoderation":
		es, err := l.Held(ctx)
		return rows(es, err, func(e Entry) idReason { return idReason{e.Key, e.Reason} })
	case "changerelayname", "changerelaydescription", "changerelayicon":
		v, err := req.str(0, "new value", false)
		if err != nil {
			return nil, err
		}
		field := map[string]string{"changerelayname": "name", "changerelaydescription": "description", "changerelayicon": "icon"}[req.Method]
		return true, l.SetInfo(ctx, field, v)
	case "allowkind", "disallowkind":
		k, err := req.kind(0)
		if err != nil {
			return nil, err
		}
		if req.Method == "allowkind" {
			return true, l.AllowKind(ctx, k)
		}
		return true, l.DisallowKind(ctx, k)
	case "listallowedkinds":
		ks, err := l.kinds(ctx, ListAllowedKinds)
		return orEmpty(ks), err
	case "listdisallowedkinds":
		ks, err := l.kinds(ctx, ListDisallowKinds)
		return orEmpty(ks), err
	case "blockip", "unblockip":
		s, err := req.str(0, "IP address", false)
		if err != nil {
			return nil, err
		}
		p, err := ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("invalid: %s: %v", req.Method, err)
		}
		if req.Method == "unblockip" {
			_, err = l.UnblockIP(ctx, p)
			return true, err
		}
		reason, err := req.str(1, "reason", true)
		if err != nil {
			return nil, err
		}
		return true, l.BlockIP(ctx, p, reason)
	case "listblockedips":
		es, err := l.list(ctx, ListBlockedIPs)
		return rows(es, err, func(e Entry) ipReason { return ipReason{e.Key, e.Reason} })
	}
	return nil, fmt.Errorf("unsupported: method %q; supportedmethods lists the ones this relay has", req.Method)
}

func orEmpty(ks []int) []int {
	if ks == nil {
		return []int{}
	}
	return ks
}
