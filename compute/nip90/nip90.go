// Package nip90 bridges Nostr clients to the compute market: a node
// whose relay stores a NIP-90 job request (a data vending machine
// request) of a kind it serves answers it on the same relay with a
// kind 7000 feedback "processing", then the result (the request's kind
// + 1000) and a feedback "success", or a feedback "error" saying why
// (spec/compute.md "NIP-90 bridge").
//
// Kinds served: 5970 (event proof of work, NIP-13), 5400 (count events
// matching NIP-01 filters in this relay's store), and KindWasm, which
// runs a content-addressed WebAssembly module on the mesh's executors
// through the node's compute market and its verification.
//
// Payment is stripped both ways: a request's bid is never honoured nor
// read, and the bridge never sends an amount tag, an invoice or a
// "payment-required" status; the request is not echoed in a "request"
// tag, since it may carry a bid. It is not a DVM marketplace (no NIP-89
// announcement), and it does not take encrypted requests. The request
// parsing and the proof-of-work loop are hand-written: NIP-90 is a few
// tags, and no maintained Go library implements it.
package nip90

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"strconv"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/compute"
	"fleetmesh.org/fleetmesh/nostr"
)

// Kinds the bridge serves, and the feedback kind.
const (
	KindPoW      = 5970
	KindCount    = 5400
	KindWasm     = 5990 // fleetmesh: run a content-addressed WebAssembly module
	KindFeedback = 7000
	resultOffset = 1000
)

// Bounds (spec/limits.md "NIP-90 bridge").
const (
	// MaxPoW is the most leading zero bits a 5970 request may ask for:
	// about 2^24 hashes at most, a few seconds of one core.
	MaxPoW = 24
	// MaxConcurrent is how many requests the bridge works on at once;
	// more get a feedback error.
	MaxConcurrent = 4
	// MaxFilters bounds a 5400 request's filters.
	MaxFilters = 16
	// MaxRequestBytes bounds a request's content and tags together.
	MaxRequestBytes = 2 * (compute.MaxModuleBytes + compute.MaxInputBytes)
	// timeout bounds one request's work.
	timeout = 2 * time.Minute
)

// Hooks are what the bridge uses of the node.
type Hooks struct {
	// Publish stores and spreads an event the bridge signed.
	Publish func(ctx context.Context, ev *nostr.Event) error
	// Count counts the events of the node's store matching f.
	Count func(ctx context.Context, f *nostr.Filter) (int64, error)
	// Run runs a job on the mesh (compute.Market.Run).
	Run func(ctx context.Context, job compute.Job, redundancy int) (*compute.Verdict, error)
}

// Bridge answers NIP-90 job requests stored by the node's relay.
type Bridge struct {
	key   nostr.SecretKey
	pub   string
	hooks Hooks
	log   *slog.Logger
	sem   chan struct{}
	wg    sync.WaitGroup
	ctx   context.Context
	stop  context.CancelFunc
}

// New makes a bridge that signs with key (the bridge's own Nostr key,
// never the node's nor a user's).
func New(key nostr.SecretKey, hooks Hooks, log *slog.Logger) *Bridge {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pk := key.PubKey()
	ctx, stop := context.WithCancel(context.Background())
	return &Bridge{key: key, pub: hex.EncodeToString(pk[:]), hooks: hooks, log: log,
		sem: make(chan struct{}, MaxConcurrent), ctx: ctx, stop: stop}
}

// PubKey is the bridge's Nostr public key, hex: what clients tag with
// "p" to address it.
func (b *Bridge) PubKey() string { return b.pub }

// Close stops the work in hand and waits for it.
func (b *Bridge) Close() {
	b.stop()
	b.wg.Wait()
}

// Serves reports whether kind is a request kind the bridge answers.
func Serves(kind int) bool { return kind == KindPoW || kind == KindCount || kind == KindWasm }

// Stored is the relay's OnStored hook: a request published by a client
// of this relay, of a kind served, addressed to this bridge or to
// nobody, is taken up off the relay's path. The mesh's copies are left
// to the node their client published to.
func (b *Bridge) Stored(ev *nostr.Event, fromClient bool) {
	if !fromClient || !Serves(ev.Kind) || !b.addressed(ev) {
		return
	}
	req := *ev
	select {
	case b.sem <- struct{}{}:
	default:
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.feedback(&req, "error", fmt.Sprintf("busy: %d requests in hand, the most this bridge takes; publish it again later", MaxConcurrent))
		}()
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() { <-b.sem }()
		b.handle(&req)
	}()
}

// addressed reports whether a request names this bridge with a "p" tag,
// or names no service provider at all.
func (b *Bridge) addressed(ev *nostr.Event) bool {
	named := false
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" {
			if t[1] == b.pub {
				return true
			}
			named = true
		}
	}
	return !named
}

func (b *Bridge) handle(req *nostr.Event) {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	r, err := Parse(req)
	if err != nil {
		b.feedback(req, "error", err.Error())
		return
	}
	b.feedback(req, "processing", "")
	var content string
	var extra nostr.Tags
	switch req.Kind {
	case KindPoW:
		content, err = b.pow(ctx, req, r)
	case KindCount:
		content, err = b.count(ctx, r)
	case KindWasm:
		content, extra, err = b.wasm(ctx, r)
	}
	if err != nil {
		b.feedback(req, "error", err.Error())
		return
	}
	res := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: req.Kind + resultOffset, Content: content,
		Tags: append(b.replyTags(req, r), extra...)}
	if err := b.sign(ctx, res); err != nil {
		b.log.Warn("nip90: publishing a result", "request", req.IDHex(), "err", err)
		return
	}
	b.feedback(req, "success", "")
}

// replyTags are the tags of every answer: the request's id and author,
// and its inputs. Never the request itself (its bid) nor an amount.
func (b *Bridge) replyTags(req *nostr.Event, r *Request) nostr.Tags {
	ts := nostr.Tags{{"e", req.IDHex()}, {"p", req.PubKeyHex()}}
	for _, in := range r.Inputs {
		if in.Marker != "module" && len(in.Data) <= 1024 {
			ts = append(ts, []string{"i", in.Data, in.Type})
		}
	}
	return ts
}

// feedback publishes a kind 7000 with a status: processing, error or
// success (never payment-required).
func (b *Bridge) feedback(req *nostr.Event, status, info string) {
	tags := nostr.Tags{{"status", status}, {"e", req.IDHex()}, {"p", req.PubKeyHex()}}
	if info != "" {
		tags[0] = append(tags[0], info)
	}
	ev := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: KindFeedback, Tags: tags}
	if err := b.sign(b.ctx, ev); err != nil {
		b.log.Warn("nip90: publishing feedback", "request", req.IDHex(), "status", status, "err", err)
	}
}

func (b *Bridge) sign(ctx context.Context, ev *nostr.Event) error {
	if err := b.key.Sign(ev); err != nil {
		return err
	}
	return b.hooks.Publish(ctx, ev)
}

// Input is one "i" tag: data, its type and its marker.
type Input struct {
	Data, Type, Marker string
}

// Request is a job request's parts the bridge reads: inputs, params and
// whether it is encrypted. Bids are never read.
type Request struct {
	Inputs []Input
	Params map[string]string
}

// Parse reads a request's inputs and params, refusing what the bridge
// does not take, with the reason a feedback "error" carries.
func Parse(ev *nostr.Event) (*Request, error) {
	size := len(ev.Content)
	r := &Request{Params: map[string]string{}}
	for _, t := range ev.Tags {
		for _, s := range t {
			size += len(s)
		}
		if len(t) == 0 {
			continue
		}
		switch t[0] {
		case "encrypted":
			return nil, errors.New("encrypted requests are not taken by this bridge: publish the request in clear")
		case "i":
			if len(t) < 3 {
				return nil, errors.New(`an "i" tag needs data and a type: ["i", data, type]`)
			}
			in := Input{Data: t[1], Type: t[2]}
			if len(t) >= 5 {
				in.Marker = t[4]
			}
			r.Inputs = append(r.Inputs, in)
		case "param":
			if len(t) < 3 {
				return nil, errors.New(`a "param" tag needs a name and a value: ["param", name, value]`)
			}
			r.Params[t[1]] = t[2]
		}
	}
	if size > MaxRequestBytes {
		return nil, fmt.Errorf("request of %d bytes: this bridge takes at most %d", size, MaxRequestBytes)
	}
	if ev.Kind == KindCount && len(r.Inputs) == 0 && ev.Content != "" {
		// 5400 puts its filters in the content.
		r.Inputs = append(r.Inputs, Input{Data: ev.Content, Type: "text"})
	}
	return r, nil
}

// pow mines NIP-13 proof of work on the event template of the "i" tag:
// a nonce tag counted up from 0 until the id has the leading zero bits
// asked for, so two honest bridges find the same nonce.
func (b *Bridge) pow(ctx context.Context, req *nostr.Event, r *Request) (string, error) {
	if len(r.Inputs) != 1 || r.Inputs[0].Type != "text" {
		return "", errors.New(`5970 needs one input: ["i", "<event JSON>", "text"]`)
	}
	target, err := strconv.Atoi(r.Params["pow"])
	if err != nil || target < 1 || target > MaxPoW {
		return "", fmt.Errorf(`param "pow" %q: give the leading zero bits wanted, 1 to %d`, r.Params["pow"], MaxPoW)
	}
	var tmpl struct {
		PubKey    string     `json:"pubkey"`
		CreatedAt int64      `json:"created_at"`
		Kind      int        `json:"kind"`
		Tags      [][]string `json:"tags"`
		Content   string     `json:"content"`
	}
	if err := json.Unmarshal([]byte(r.Inputs[0].Data), &tmpl); err != nil {
		return "", fmt.Errorf("the input is not an event's JSON: %v", err)
	}
	ev := nostr.Event{PubKey: req.PubKey, CreatedAt: tmpl.CreatedAt, Kind: tmpl.Kind, Content: tmpl.Content}
	if tmpl.PubKey != "" {
		pk, err := hex.DecodeString(tmpl.PubKey)
		if err != nil || len(pk) != 32 {
			return "", fmt.Errorf("the input's pubkey %.80q is not 64 hex digits", tmpl.PubKey)
		}
		copy(ev.PubKey[:], pk)
	}
	for _, t := range tmpl.Tags {
		if len(t) > 0 && t[0] != "nonce" {
			ev.Tags = append(ev.Tags, t)
		}
	}
	nonce := []string{"nonce", "0", strconv.Itoa(target)}
	ev.Tags = append(ev.Tags, nonce)
	for n := uint64(0); ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return "", errors.New("timed out before finding the proof of work")
		}
		nonce[1] = strconv.FormatUint(n, 10)
		id := ev.ComputeID()
		if leadingZeros(id) >= target {
			ev.ID = id
			break
		}
	}
	out := map[string]any{"id": ev.IDHex(), "pubkey": ev.PubKeyHex(), "created_at": ev.CreatedAt, "kind": ev.Kind,
		"tags": ev.Tags, "content": ev.Content}
	j, err := json.Marshal(out)
	return string(j), err
}

// leadingZeros counts an id's leading zero bits (NIP-13).
func leadingZeros(id [32]byte) int {
	n := 0
	for _, x := range id {
		if x == 0 {
			n += 8
			continue
		}
		return n + bits.LeadingZeros8(x)
	}
	return n
}

// count answers 5400: the events of this relay's store matching any of
// the filters (each filter counted alone and summed, as the store
// counts; an event matching two filters counts twice).
func (b *Bridge) count(ctx context.Context, r *Request) (string, error) {
	if len(r.Inputs) != 1 {
		return "", errors.New("5400 needs one input: a JSON list of NIP-01 filters in the content or an \"i\" tag")
	}
	if _, ok := r.Params["group"]; ok {
		return "", errors.New(`param "group" is not supported by this bridge: ask without it`)
	}
	var fs []nostr.Filter
	if err := json.Unmarshal([]byte(r.Inputs[0].Data), &fs); err != nil {
		return "", fmt.Errorf("the input is not a JSON list of filters: %v", err)
	}
	if len(fs) == 0 || len(fs) > MaxFilters {
		return "", fmt.Errorf("%d filters: give 1 to %d", len(fs), MaxFilters)
	}
	var total int64
	for i := range fs {
		n, err := b.hooks.Count(ctx, &fs[i])
		if err != nil {
			return "", fmt.Errorf("counting: %v", err)
		}
		total += n
	}
	return strconv.FormatInt(total, 10), nil
}

// wasm answers KindWasm: param "module" names the module's CID, an "i"
// tag of type "text" marked "module" carries its bytes (base64), and an
// unmarked one the input (base64). The job runs on the mesh; the result's
// content is the output, base64, with its hash and the outcome in tags.
func (b *Bridge) wasm(ctx context.Context, r *Request) (string, nostr.Tags, error) {
	name := r.Params["module"]
	var module, input []byte
	var err error
	for _, in := range r.Inputs {
		var data []byte
		if data, err = base64.StdEncoding.DecodeString(in.Data); err != nil {
			return "", nil, fmt.Errorf("input marked %q is not base64: %v", in.Marker, err)
		}
		if in.Marker == "module" {
			module = data
		} else {
			input = data
		}
	}
	if module == nil {
		return "", nil, errors.New(`no module: give its bytes in ["i", "<base64>", "text", "", "module"] and its CID in ["param", "module", "<cid>"]`)
	}
	if err := compute.CheckModule(name, module); err != nil {
		return "", nil, fmt.Errorf(`param "module": %v`, err)
	}
	k := 0
	if s, ok := r.Params["redundancy"]; ok {
		if k, err = strconv.Atoi(s); err != nil || k < 1 || k > compute.MaxRedundancy {
			return "", nil, fmt.Errorf(`param "redundancy" %q: give 1 to %d`, s, compute.MaxRedundancy)
		}
	}
	v, err := b.hooks.Run(ctx, compute.Job{Module: module, Input: input}, k)
	if err != nil {
		return "", nil, err
	}
	if v.Outcome != "ok" {
		return "", nil, fmt.Errorf("%s: %s", v.Outcome, v.Reason)
	}
	sum := sha256.Sum256(v.Output)
	return base64.StdEncoding.EncodeToString(v.Output), nostr.Tags{{"result_hash", hex.EncodeToString(sum[:])}, {"outcome", v.Outcome}}, nil
}
