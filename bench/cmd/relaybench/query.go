package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// filter is a NIP-01 filter as the bench sends it.
type filter struct {
	IDs     []string `json:"ids,omitempty"`
	Authors []string `json:"authors,omitempty"`
	Kinds   []int    `json:"kinds,omitempty"`
	E       []string `json:"#e,omitempty"`
	P       []string `json:"#p,omitempty"`
	T       []string `json:"#t,omitempty"`
	Since   *int64   `json:"since,omitempty"`
	Until   *int64   `json:"until,omitempty"`
	Limit   int      `json:"limit,omitempty"`
}

// query is one REQ of the mix: a shape name and its filter.
type query struct {
	shape  string
	filter filter
}

// shapes lists the filter shapes of the mix, in report order. Every filter
// has a limit of at most 500 (strfry's default cap) so that no relay's own
// maximum changes the answer.
var shapes = []string{
	"ids",            // 1-10 ids: fetching quoted or referenced notes
	"author_kinds",   // one author's recent notes: a profile page
	"feed_authors",   // 50 followed authors' notes: a home feed
	"kind_limit",     // newest events of one kind: a global feed
	"tag_e",          // replies and reactions to one note: a thread
	"tag_p",          // notes and reactions mentioning one key: notifications
	"tag_t",          // newest notes with a hashtag
	"created_window", // everything in a one-hour created_at window
}

// buildQueries makes n queries of the mix from the corpus, deterministically
// from seed, cycling through the shapes so each gets n/len(shapes).
func buildQueries(c *corpus, n int, seed uint64) []query {
	rng := rand.New(rand.NewPCG(seed, 0xbb67ae8584caa73b))
	var withE []int
	for i, m := range c.meta {
		if m.eTag != "" {
			withE = append(withE, i)
		}
	}
	minT, maxT := c.meta[0].createdAt, c.meta[0].createdAt
	for _, m := range c.meta {
		minT, maxT = min(minT, m.createdAt), max(maxT, m.createdAt)
	}
	qs := make([]query, 0, n)
	for i := range n {
		shape := shapes[i%len(shapes)]
		var f filter
		switch shape {
		case "ids":
			for range 1 + rng.IntN(10) {
				f.IDs = append(f.IDs, c.meta[rng.IntN(len(c.meta))].id)
			}
		case "author_kinds":
			f.Authors = []string{c.authors[rng.IntN(len(c.authors))]}
			f.Kinds = []int{1, 6}
			f.Limit = 20
		case "feed_authors":
			for range 50 {
				f.Authors = append(f.Authors, c.authors[rng.IntN(len(c.authors))])
			}
			f.Kinds = []int{1, 6, 30023}
			f.Limit = 50
		case "kind_limit":
			f.Kinds = []int{[]int{1, 7, 30023}[rng.IntN(3)]}
			f.Limit = 100
		case "tag_e":
			if len(withE) > 0 {
				f.E = []string{c.meta[withE[rng.IntN(len(withE))]].eTag}
			} else {
				f.E = []string{c.meta[rng.IntN(len(c.meta))].id}
			}
			f.Kinds = []int{1, 7}
			f.Limit = 500
		case "tag_p":
			f.P = []string{c.authors[rng.IntN(len(c.authors))]}
			f.Kinds = []int{1, 7}
			f.Limit = 100
		case "tag_t":
			f.T = []string{hashtags[rng.IntN(len(hashtags))]}
			f.Kinds = []int{1}
			f.Limit = 50
		case "created_window":
			since := minT + rng.Int64N(max(maxT-minT-3600, 1))
			until := since + 3600
			f.Since, f.Until = &since, &until
			f.Limit = 500
		}
		qs = append(qs, query{shape: shape, filter: f})
	}
	return qs
}

// queryConfig shapes the REQ phase.
type queryConfig struct {
	clients  int           // concurrent connections, each sequential
	warmup   int           // queries run first and not measured
	timeout  time.Duration // whole phase
	eoseWait time.Duration // max wait for one EOSE
}

// shapeStats is latency and result size for one filter shape.
type shapeStats struct {
	Count        int     `json:"count"`
	Timeouts     int     `json:"timeouts"` // REQs with no EOSE within the wait, counted at the wait in the percentiles
	P50ms        float64 `json:"p50ms"`
	P99ms        float64 `json:"p99ms"`
	MeanMs       float64 `json:"meanMs"`
	EventsPerReq float64 `json:"eventsPerReq"`
	TotalEvents  int64   `json:"totalEvents"`
}

// queryResult is the REQ phase's outcome for one relay.
type queryResult struct {
	All      shapeStats            `json:"all"`
	Shapes   map[string]shapeStats `json:"shapes"`
	Seconds  float64               `json:"seconds"`
	QPS      float64               `json:"reqPerSec"`
	Failures int64                 `json:"failures"`
	NotRun   int64                 `json:"notRun"` // measured REQs never sent because the phase hit its time limit
	Errors   []string              `json:"errors,omitempty"`
	TimedOut bool                  `json:"timedOut"`
	// Counts holds the number of events returned for every measured query,
	// in query order (-1: not run), so two relays' answers can be compared.
	Counts []int `json:"-"`
}

type sample struct {
	attempted bool
	lat       time.Duration
	events    int
	ok        bool
	timedOut  bool
}

// runQueries sends qs (after cfg.warmup warm-up queries taken from the
// front of the list) from cfg.clients connections, each sending one REQ,
// reading until its EOSE, then CLOSE, and records the time to EOSE.
func runQueries(ctx context.Context, relayURL string, qs []query, cfg queryConfig) queryResult {
	res := queryResult{Shapes: map[string]shapeStats{}}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	warm := min(cfg.warmup, len(qs))
	samples := make([]sample, len(qs))
	var next atomic.Int64
	var errMu sync.Mutex
	var errs []string
	record := func(err error) {
		errMu.Lock()
		if len(errs) < 20 {
			errs = append(errs, err.Error())
		}
		errMu.Unlock()
	}

	var wg sync.WaitGroup
	var measuredStart time.Time
	var startOnce sync.Once
	for ci := range cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := dial(ctx, relayURL)
			if err != nil {
				record(err)
				return
			}
			defer func() {
				if conn != nil {
					conn.Close()
				}
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(qs) || ctx.Err() != nil {
					return
				}
				if i == warm {
					startOnce.Do(func() { measuredStart = time.Now() })
				}
				s, err := oneREQ(conn, fmt.Sprintf("b%d-%d", ci, i), qs[i].filter, cfg.eoseWait)
				s.attempted = true
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						s.timedOut, s.lat = true, cfg.eoseWait
					}
					record(fmt.Errorf("%s query %d: %w", qs[i].shape, i, err))
					if errors.Is(err, errConnBroken) {
						// The relay may still be working on the REQ; a
						// fresh connection keeps the next one independent.
						conn.Close()
						if conn, err = dial(ctx, relayURL); err != nil {
							conn = nil
							record(err)
							samples[i] = s
							return
						}
					}
				}
				samples[i] = s
			}
		}()
	}
	wg.Wait()
	if measuredStart.IsZero() {
		measuredStart = time.Now()
	}
	res.Seconds = time.Since(measuredStart).Seconds()
	res.TimedOut = ctx.Err() != nil
	res.Errors = errs

	byShape := map[string][]sample{}
	var all []sample
	for i := warm; i < len(qs); i++ {
		s := samples[i]
		if !s.attempted {
			res.NotRun++
			res.Counts = append(res.Counts, -1)
			continue
		}
		res.Counts = append(res.Counts, s.events)
		if !s.ok && !s.timedOut {
			res.Failures++
			continue
		}
		byShape[qs[i].shape] = append(byShape[qs[i].shape], s)
		all = append(all, s)
	}
	res.All = summarize(all)
	for sh, ss := range byShape {
		res.Shapes[sh] = summarize(ss)
	}
	if res.Seconds > 0 {
		res.QPS = float64(len(all)) / res.Seconds
	}
	return res
}

var errConnBroken = errors.New("connection broken")

// oneREQ sends one subscription and reads until its EOSE (or CLOSED),
// then closes it.
func oneREQ(conn *websocket.Conn, subID string, f filter, wait time.Duration) (sample, error) {
	fj, err := json.Marshal(f)
	if err != nil {
		return sample{}, err
	}
	msg := fmt.Appendf(nil, `["REQ",%q,%s]`, subID, fj)
	start := time.Now()
	conn.SetWriteDeadline(start.Add(wait))
	if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
		return sample{}, fmt.Errorf("%w: write: %w", errConnBroken, err)
	}
	var s sample
	for {
		conn.SetReadDeadline(start.Add(wait))
		_, in, err := conn.ReadMessage()
		if err != nil {
			return s, fmt.Errorf("%w: read: %w", errConnBroken, err)
		}
		label, sub, ok := frameHead(in)
		if !ok {
			return s, fmt.Errorf("%w: malformed relay message %.200q", errConnBroken, in)
		}
		if sub != subID {
			continue // a late CLOSED or similar for an earlier subscription
		}
		switch label {
		case "EVENT":
			s.events++
		case "EOSE":
			s.lat = time.Since(start)
			s.ok = true
			closeMsg := fmt.Appendf(nil, `["CLOSE",%q]`, subID)
			if err := conn.WriteMessage(websocket.TextMessage, closeMsg); err != nil {
				return s, fmt.Errorf("%w: write CLOSE: %v", errConnBroken, err)
			}
			return s, nil
		case "CLOSED":
			return s, fmt.Errorf("relay refused REQ %s: %.300s", fj, in)
		}
	}
}

func summarize(ss []sample) shapeStats {
	if len(ss) == 0 {
		return shapeStats{}
	}
	lats := make([]time.Duration, len(ss))
	var sum time.Duration
	var events int64
	timeouts := 0
	for i, s := range ss {
		if s.timedOut {
			timeouts++
		}
		lats[i] = s.lat
		sum += s.lat
		events += int64(s.events)
	}
	slices.Sort(lats)
	return shapeStats{
		Count:        len(ss),
		Timeouts:     timeouts,
		P50ms:        ms(percentile(lats, 0.50)),
		P99ms:        ms(percentile(lats, 0.99)),
		MeanMs:       ms(sum / time.Duration(len(ss))),
		EventsPerReq: float64(events) / float64(len(ss)),
		TotalEvents:  events,
	}
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
