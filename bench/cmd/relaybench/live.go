package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// liveConfig shapes the live phase: subscriptions left open on the filled
// store while new events arrive at a steady rate.
type liveConfig struct {
	subs    int     // open subscriptions, mixed filters
	conns   int     // connections they are spread over
	events  int     // new events published
	rate    float64 // events per second
	seed    uint64
	timeout time.Duration
}

// liveResult is what the live phase measured for one relay. "After OK" is
// the time from the publisher's OK for an event to its arrival at a
// subscriber: the latency a live subscription adds on top of the write. It
// is negative when a relay delivers before it acknowledges.
type liveResult struct {
	Subs       int     `json:"subs"`
	Conns      int     `json:"conns"`
	Events     int     `json:"events"`
	RatePerSec float64 `json:"ratePerSec"`
	OKTrue     int64   `json:"okTrue"`
	// Expected is how many (subscription, event) deliveries the filters
	// call for, by go-nostr's matcher; Delivered how many distinct ones
	// arrived, Duplicates how many arrived again.
	Expected   int64 `json:"expected"`
	Delivered  int64 `json:"delivered"`
	Duplicates int64 `json:"duplicates"`
	Unexpected int64 `json:"unexpected"` // deliveries of an event to a subscription that does not match it
	// Dropped counts subscriber connections the relay closed during the
	// phase (fleetmesh closes a connection whose send queue is full rather
	// than skip live events for it).
	Dropped int64 `json:"droppedConns"`
	// Percentiles of delivery time minus OK time, and minus send time.
	AfterOKP50ms   float64  `json:"afterOkP50ms"`
	AfterOKP99ms   float64  `json:"afterOkP99ms"`
	AfterOKMaxMs   float64  `json:"afterOkMaxMs"`
	AfterSendP50ms float64  `json:"afterSendP50ms"`
	AfterSendP99ms float64  `json:"afterSendP99ms"`
	OKP50ms        float64  `json:"okP50ms"` // send to OK of the publisher
	OKP99ms        float64  `json:"okP99ms"`
	SubscribeSecs  float64  `json:"subscribeSeconds"` // until every subscription had its EOSE
	Errors         []string `json:"errors,omitempty"`
}

// liveSet is the live phase's events and subscriptions, built the same way
// for every relay except for created_at, which is the phase's start.
type liveSet struct {
	frames  [][]byte
	ids     map[string]int32
	events  []*nostr.Event
	filters []nostr.Filter
	reqs    [][]byte         // REQ messages, subscription i is "l<i>"
	matches [][]int32        // matches[e]: the subscriptions event e matches
	subIdx  map[string]int32 // "l<i>" -> i
}

// liveAuthors bounds the authors of live events and of author filters, so
// that author subscriptions see some of the traffic.
const liveAuthors = 200

func buildLiveSet(c *corpus, cfg liveConfig, start int64) (*liveSet, error) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x3c6ef372fe94f82b))
	nAuth := min(liveAuthors, len(c.authors))
	var hot []string
	for i := len(c.meta) - 1; i >= 0 && len(hot) < 50; i-- {
		if c.meta[i].kind == 1 {
			hot = append(hot, c.meta[i].id)
		}
	}
	since := nostr.Timestamp(start - 1)
	ls := &liveSet{ids: map[string]int32{}, subIdx: map[string]int32{}}
	for i := range cfg.subs {
		f := nostr.Filter{Since: &since}
		switch i % 5 {
		case 0: // a follow list's live feed
			for range 10 {
				f.Authors = append(f.Authors, c.authors[rng.IntN(nAuth)])
			}
			f.Kinds = []int{1}
		case 1: // notifications
			f.Tags = nostr.TagMap{"p": {c.authors[rng.IntN(min(100, nAuth))]}}
		case 2: // a hashtag
			f.Tags = nostr.TagMap{"t": {hashtags[rng.IntN(len(hashtags))]}}
			f.Kinds = []int{1}
		case 3: // a thread
			f.Tags = nostr.TagMap{"e": {hot[rng.IntN(len(hot))]}}
			f.Kinds = []int{1, 7}
		case 4: // all reactions
			f.Kinds = []int{7}
		}
		fj, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		sub := fmt.Sprintf("l%d", i)
		ls.subIdx[sub] = int32(i)
		ls.filters = append(ls.filters, f)
		ls.reqs = append(ls.reqs, fmt.Appendf(nil, `["REQ",%q,%s]`, sub, fj))
	}
	for i := range cfg.events {
		a := rng.IntN(nAuth)
		ev := &nostr.Event{
			PubKey:    c.authors[a],
			CreatedAt: nostr.Timestamp(start + int64(float64(i)/cfg.rate)),
			Tags:      nostr.Tags{},
		}
		if rng.IntN(100) < 80 {
			ev.Kind = 1
			ev.Content = words(rng, 50+rng.IntN(200))
			ev.Tags = append(ev.Tags, nostr.Tag{"t", hashtags[rng.IntN(len(hashtags))]}, nostr.Tag{"p", c.authors[rng.IntN(min(100, nAuth))]})
			if rng.IntN(2) == 0 {
				ev.Tags = append(ev.Tags, nostr.Tag{"e", hot[rng.IntN(len(hot))], "", "reply"})
			}
		} else {
			ev.Kind = 7
			ev.Content = reactions[rng.IntN(len(reactions))]
			ev.Tags = append(ev.Tags, nostr.Tag{"e", hot[rng.IntN(len(hot))]}, nostr.Tag{"p", c.authors[rng.IntN(min(100, nAuth))]})
		}
		key := authorKey(cfg.seed, a)
		if hex.EncodeToString(schnorr.SerializePubKey(key.PubKey())) != ev.PubKey {
			return nil, fmt.Errorf("live: corpus author %d is not the seed's author %d", a, a)
		}
		id := ev.GetID()
		idb, _ := hex.DecodeString(id)
		sig, err := schnorr.Sign(key, idb)
		if err != nil {
			return nil, fmt.Errorf("live: sign: %w", err)
		}
		ev.ID, ev.Sig = id, hex.EncodeToString(sig.Serialize())
		b, err := ev.MarshalJSON()
		if err != nil {
			return nil, err
		}
		ls.ids[id] = int32(i)
		ls.events = append(ls.events, ev)
		ls.frames = append(ls.frames, append(append([]byte(`["EVENT",`), b...), ']'))
		var m []int32
		for si := range ls.filters {
			if ls.filters[si].Matches(ev) {
				m = append(m, int32(si))
			}
		}
		ls.matches = append(ls.matches, m)
	}
	return ls, nil
}

type delivery struct {
	sub, ev int32
	at      time.Time
}

// runLive opens the subscriptions, waits for every EOSE, then publishes the
// live events one at a time at the configured rate from one connection and
// records when each OK and each delivery arrives.
func runLive(ctx context.Context, relayURL string, c *corpus, cfg liveConfig) liveResult {
	res := liveResult{Subs: cfg.subs, Conns: cfg.conns, Events: cfg.events, RatePerSec: cfg.rate}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	var errMu sync.Mutex
	fail := func(err error) {
		errMu.Lock()
		if len(res.Errors) < 20 {
			res.Errors = append(res.Errors, err.Error())
		}
		errMu.Unlock()
	}
	start := time.Now()
	ls, err := buildLiveSet(c, cfg, start.Unix())
	if err != nil {
		fail(err)
		return res
	}
	for _, m := range ls.matches {
		res.Expected += int64(len(m))
	}

	conns := make([]*websocket.Conn, max(cfg.conns, 1))
	for i := range conns {
		if conns[i], err = dial(ctx, relayURL); err != nil {
			fail(err)
			for _, cn := range conns[:i] {
				cn.Close()
			}
			return res
		}
	}
	var eose sync.WaitGroup
	eose.Add(cfg.subs)
	perConn := make([][]delivery, len(conns))
	var readers sync.WaitGroup
	var closing atomic.Bool
	var dropped atomic.Int64
	for ci, cn := range conns {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				_, msg, err := cn.ReadMessage()
				at := time.Now()
				if err != nil {
					if !closing.Load() {
						dropped.Add(1)
						fail(fmt.Errorf("live: subscriber connection %d: %w", ci, err))
					}
					return
				}
				label, sub, ok := frameHead(msg)
				if !ok {
					fail(fmt.Errorf("live: malformed relay message %.200q", msg))
					continue
				}
				si, mine := ls.subIdx[sub]
				switch {
				case !mine:
				case label == "EOSE":
					eose.Done()
				case label == "CLOSED":
					fail(fmt.Errorf("live: subscription %s refused: %.300s", sub, msg))
					eose.Done()
				case label == "EVENT":
					if ei, ok := ls.ids[eventID(msg)]; ok {
						perConn[ci] = append(perConn[ci], delivery{sub: si, ev: ei, at: at})
					}
				}
			}
		}()
	}
	closeAll := func() {
		closing.Store(true)
		for _, cn := range conns {
			cn.Close()
		}
		readers.Wait()
	}
	for si, req := range ls.reqs {
		cn := conns[si%len(conns)]
		cn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if err := cn.WriteMessage(websocket.TextMessage, req); err != nil {
			fail(fmt.Errorf("live: subscribe: %w", err))
			closeAll()
			return res
		}
	}
	eoseDone := make(chan struct{})
	go func() { eose.Wait(); close(eoseDone) }()
	select {
	case <-eoseDone:
	case <-time.After(2 * time.Minute):
		fail(fmt.Errorf("live: not every subscription had its EOSE within 2 minutes"))
		closeAll()
		return res
	case <-ctx.Done():
		closeAll()
		return res
	}
	res.SubscribeSecs = time.Since(start).Seconds()

	pub, err := dial(ctx, relayURL)
	if err != nil {
		fail(err)
		closeAll()
		return res
	}
	sentAt := make([]time.Time, len(ls.frames))
	okAt := make([]time.Time, len(ls.frames))
	var okCount atomic.Int64
	okDone := make(chan struct{})
	go func() {
		defer close(okDone)
		for okCount.Load() < int64(len(ls.frames)) {
			pub.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, msg, err := pub.ReadMessage()
			at := time.Now()
			if err != nil {
				fail(fmt.Errorf("live: publisher read after %d OKs: %w", okCount.Load(), err))
				return
			}
			label, id, ok := frameHead(msg)
			if !ok || label != "OK" {
				continue
			}
			ei, known := ls.ids[id]
			if !known {
				continue
			}
			var ack []json.RawMessage
			var accepted bool
			if json.Unmarshal(msg, &ack) != nil || len(ack) < 3 || json.Unmarshal(ack[2], &accepted) != nil || !accepted {
				fail(fmt.Errorf("live: %.300s", msg))
			} else {
				okAt[ei] = at
				res.OKTrue++
			}
			okCount.Add(1)
		}
	}()
	t0 := time.Now()
	for i, f := range ls.frames {
		if d := time.Until(t0.Add(time.Duration(float64(i) / cfg.rate * float64(time.Second)))); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		pub.SetWriteDeadline(time.Now().Add(30 * time.Second))
		sentAt[i] = time.Now()
		if err := pub.WriteMessage(websocket.TextMessage, f); err != nil {
			fail(fmt.Errorf("live: publish: %w", err))
			break
		}
	}
	select {
	case <-okDone:
	case <-ctx.Done():
	}
	// Deliveries still on their way get a bounded grace period.
	grace := time.Now().Add(5 * time.Second)
	for time.Now().Before(grace) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	pub.Close()
	<-okDone
	closeAll()

	res.Dropped = dropped.Load()
	seen := map[[2]int32]bool{}
	var afterOK, afterSend, okLat []time.Duration
	for i := range okAt {
		if !okAt[i].IsZero() && !sentAt[i].IsZero() {
			okLat = append(okLat, okAt[i].Sub(sentAt[i]))
		}
	}
	for _, ds := range perConn {
		for _, d := range ds {
			k := [2]int32{d.sub, d.ev}
			if seen[k] {
				res.Duplicates++
				continue
			}
			seen[k] = true
			if !slices.Contains(ls.matches[d.ev], d.sub) {
				res.Unexpected++
				continue
			}
			res.Delivered++
			if !okAt[d.ev].IsZero() {
				afterOK = append(afterOK, d.at.Sub(okAt[d.ev]))
			}
			if !sentAt[d.ev].IsZero() {
				afterSend = append(afterSend, d.at.Sub(sentAt[d.ev]))
			}
		}
	}
	for _, l := range [][]time.Duration{afterOK, afterSend, okLat} {
		slices.Sort(l)
	}
	if len(afterOK) > 0 {
		res.AfterOKP50ms = msSigned(percentile(afterOK, 0.5))
		res.AfterOKP99ms = msSigned(percentile(afterOK, 0.99))
		res.AfterOKMaxMs = msSigned(afterOK[len(afterOK)-1])
	}
	if len(afterSend) > 0 {
		res.AfterSendP50ms = msSigned(percentile(afterSend, 0.5))
		res.AfterSendP99ms = msSigned(percentile(afterSend, 0.99))
	}
	if len(okLat) > 0 {
		res.OKP50ms = msSigned(percentile(okLat, 0.5))
		res.OKP99ms = msSigned(percentile(okLat, 0.99))
	}
	return res
}

// eventID finds the id of the event in an EVENT frame: the 64 hex digits
// after its "id" key (content and tags of the bench's events never hold
// that key's text unescaped).
func eventID(msg []byte) string {
	i := bytes.Index(msg, []byte(`"id":"`))
	if i < 0 || i+6+64 > len(msg) {
		return ""
	}
	return string(msg[i+6 : i+6+64])
}

func msSigned(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
