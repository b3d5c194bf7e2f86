package mediator

import (
	"bytes"
	"context"
	"encoding/json"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/didcomm"
)

// Push bounds.
const (
	// MaxPushEndpointBytes bounds a registered endpoint URL.
	MaxPushEndpointBytes = 2048
	// PushInterval is the least time between two wakes of one leaf:
	// messages queued meanwhile are covered by one later wake.
	PushInterval = 30 * time.Second
	// pushTimeout bounds one POST to a push endpoint.
	pushTimeout = 10 * time.Second
	// pushQueue bounds the leaves waiting for a wake; beyond it a wake is
	// dropped (a push is a hint: the leaf's periodic wake still comes).
	pushQueue = 1024
)

// bucketPush maps a leaf DID to its push endpoint. It lives only in this
// mediator's database: a push subscription is never replicated and never
// crosses the boundary (docs/design.md §5).
var bucketPush = []byte("push")

func (s *store) setPush(leaf, endpoint string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketPush)
		if err != nil {
			return err
		}
		if endpoint == "" {
			return b.Delete([]byte(leaf))
		}
		return b.Put([]byte(leaf), []byte(endpoint))
	})
}

func (s *store) pushEndpoint(leaf string) (string, error) {
	var out string
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketPush); b != nil {
			out = string(b.Get([]byte(leaf)))
		}
		return nil
	})
	return out, err
}

// checkPushEndpoint accepts an absolute http or https URL.
func checkPushEndpoint(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxPushEndpointBytes {
		return fmt.Errorf("push endpoint is %d bytes (at most %d)", len(s), MaxPushEndpointBytes)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("push endpoint %q is not an http or https URL", s)
	}
	return nil
}

func (m *Mediator) pushRegister(msg *didcomm.Message, leaf string) (*didcomm.Message, error) {
	var b mediation.PushRegisterBody
	if err := json.Unmarshal(msg.Body, &b); err != nil {
		return nil, malformed(err)
	}
	if err := checkPushEndpoint(b.Endpoint); err != nil {
		return nil, malformed(err)
	}
	if err := m.store.setPush(leaf, b.Endpoint); err != nil {
		return nil, internal(err)
	}
	return m.reply(msg, mediation.TypePushRegistered, mediation.PushRegisterBody{Endpoint: b.Endpoint})
}

// pusher sends wakes from one goroutine, which Close stops.
type pusher struct {
	store    *store
	client   *http.Client
	interval time.Duration
	log      *slog.Logger

	in     chan string
	stop   chan struct{}
	done   chan struct{}
	closer sync.Once
}

func newPusher(s *store, interval time.Duration) *pusher {
	p := &pusher{
		store:    s,
		client:   &http.Client{Timeout: pushTimeout},
		interval: interval,
		log:      slog.New(slog.DiscardHandler),
		in:       make(chan string, pushQueue),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go p.run()
	return p
}

// wake asks for a wake of leaf; it never blocks.
func (p *pusher) wake(leaf string) {
	select {
	case p.in <- leaf:
	default:
	}
}

func (p *pusher) close() {
	p.closer.Do(func() { close(p.stop) })
	<-p.done
}

// run sends at most one wake per leaf per interval; a wake asked for
// within the interval is sent when it ends.
func (p *pusher) run() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.stop
		cancel()
	}()
	last := map[string]time.Time{}
	due := map[string]time.Time{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		next := time.Time{}
		for leaf, at := range due {
			if !at.After(now) {
				delete(due, leaf)
				last[leaf] = now
				p.send(ctx, leaf)
				continue
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		for leaf, at := range last {
			if now.Sub(at) > p.interval {
				delete(last, leaf) // keeps the map to the leaves woken lately
			}
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-p.stop:
			return
		case leaf := <-p.in:
			if _, ok := due[leaf]; ok {
				break
			}
			if at, ok := last[leaf]; ok {
				due[leaf] = at.Add(p.interval)
			} else {
				due[leaf] = time.Now()
			}
		case <-timer.C:
		}
	}
}

func (p *pusher) send(ctx context.Context, leaf string) {
	endpoint, err := p.store.pushEndpoint(leaf)
	if err != nil || endpoint == "" {
		return
	}
	body, _ := json.Marshal(mediation.PushWakeBody{Type: mediation.TypePushWake})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	// UnifiedPush: a wake that need not outlive the leaf's next poll.
	req.Header.Set("TTL", "3600")
	req.Header.Set("Urgency", "high")
	resp, err := p.client.Do(req)
	if err != nil {
		p.log.Info("push wake failed", "leaf", leaf, "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}
