package leaf

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/negentropy"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
)

// Bounds of a catch-up.
const (
	// negFrameLimit keeps a NEG-MSG, hex-encoded, under the 131,072-byte
	// messages relays accept (as the relay does).
	negFrameLimit = 60000
	// maxSyncRecords bounds the local items of one reconciliation and the
	// differences it may find.
	maxSyncRecords = 500_000
	// fetchChunk is the ids one REQ asks for, and fetchParallel how many
	// such REQs run at once.
	fetchChunk, fetchParallel = 100, 4
	// pageSize is the limit of one since-window REQ.
	pageSize = 500
	// sinceOverlap is how far a since window reaches back before the
	// last catch-up, for events whose created_at lags their arrival.
	sinceOverlap = 10 * time.Minute
	// publishWindow is how many EVENTs wait for their OK at once.
	publishWindow = 16
)

// nostrPart is the wake's Nostr side: the outbox events to every home
// that answers, the catch-up of every subscription against one home (the
// first to connect; another when it fails), and, where the app allows
// serving, every subscription reconciled with every other home reached.
// A wake with no subscription and no outbox event opens no relay
// connection.
func (w *wake) nostrPart() {
	evs, es, err := w.outboxEvents()
	if err != nil {
		w.fail(fmt.Errorf("leaf: outbox: %w", err))
		return
	}
	if len(w.st.Subs) == 0 && len(evs) == 0 {
		w.setCaught()
		return
	}
	w.relays = newRelayPool(w)
	defer w.relays.closeAll()
	var wg sync.WaitGroup
	if len(evs) > 0 {
		for i := range w.st.Homes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.outboxTo(i, evs, es)
			}()
		}
	}
	reconciled := w.catchUpAll()
	if w.serve && reconciled >= 0 && len(w.st.Subs) > 0 {
		for i := range w.st.Homes {
			if i == reconciled {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.reconcileWith(i)
			}()
		}
	}
	wg.Wait()
}

func (w *wake) setCaught() {
	w.mu.Lock()
	w.caught = true
	w.mu.Unlock()
}

// catchUpAll catches up every subscription against whichever home relay
// is live or connects first, going on with another when that one fails
// (NIP-77 reconciles only what is still missing). It returns the index
// of the home that finished it (-1 if none did).
func (w *wake) catchUpAll() int {
	done := make([]bool, len(w.st.Subs))
	finished := -1
	err := w.retry(func() error {
		rc, err := w.relays.any()
		if err != nil {
			return err
		}
		w.l.progress.report("dial", 1, 1)
		for i := range w.st.Subs {
			if done[i] {
				continue
			}
			if err := w.catchUp(rc, i); err != nil {
				w.relays.drop(rc)
				return err
			}
			done[i] = true
			w.l.progress.report("catchup", int64(i+1), int64(len(w.st.Subs)))
		}
		finished = w.homeIndex(rc.home)
		return nil
	})
	if err != nil {
		w.fail(fmt.Errorf("leaf: catch-up: %w", err))
		return -1
	}
	w.setCaught()
	return finished
}

// reconcileWith reconciles every subscription with home i as the
// catch-up does (fetching what the leaf lacks, serving what the home
// lacks): the serving pass over the homes the catch-up did not use.
func (w *wake) reconcileWith(i int) {
	done := make([]bool, len(w.st.Subs))
	err := w.retryHome(i, func() error {
		rc, err := w.relays.get(i)
		if err != nil {
			return err
		}
		for j := range w.st.Subs {
			if done[j] {
				continue
			}
			if err := w.catchUp(rc, j); err != nil {
				w.relays.drop(rc)
				return err
			}
			done[j] = true
		}
		return nil
	})
	if err != nil {
		w.fail(fmt.Errorf("leaf: serving %s: %w", w.st.Homes[i].DID, err))
	}
}

// homeIndex is the index of the home with did. It reads only the DID: the
// DIDComm part writes other fields of the homes meanwhile.
func (w *wake) homeIndex(did string) int {
	for i := range w.st.Homes {
		if w.st.Homes[i].DID == did {
			return i
		}
	}
	return -1
}

// catchUp brings subscription i up to date: NIP-77 first, since windows
// when the relay cannot.
func (w *wake) catchUp(rc *relayConn, i int) error {
	sub := &w.st.Subs[i]
	f, err := parseFilter(sub.Filter)
	if err != nil {
		return permanent(err)
	}
	started := time.Now().Unix()
	need, have, err := w.reconcile(rc, &f)
	if err == nil {
		if err := w.fetch(rc, &f, need); err != nil {
			return err
		}
		if err := w.serveEvents(rc, have); err != nil {
			return err
		}
		w.setMethod("negentropy")
		return w.saveSub(sub, func(s *subState) {
			s.Covered, s.Pending = started, nil
		})
	}
	if !errors.Is(err, errNoNegentropy) {
		return err
	}
	w.setMethod("since")
	return w.sinceWalk(rc, sub, &f, started)
}

func (w *wake) setMethod(m string) {
	w.add(func(s *Summary) {
		if s.Method == "" || m == "since" {
			s.Method = m
		}
	})
}

func (w *wake) saveSub(sub *subState, fn func(*subState)) error {
	fn(sub)
	return w.l.db.updateState(func(s *state) error {
		for i := range s.Subs {
			if sameFilter(s.Subs[i].Filter, sub.Filter) {
				fn(&s.Subs[i])
			}
		}
		return nil
	})
}

// reconcile runs NIP-77 for f with the local events (and the ids evicted
// from them) as our set, and returns the ids only the relay has and
// those only the leaf has.
func (w *wake) reconcile(rc *relayConn, f *nostr.Filter) (need, have []negentropy.ID, err error) {
	items := make([]negentropy.Item, 0, 256)
	err = w.l.db.eachItem(f, func(id [32]byte, createdAt int64) bool {
		items = append(items, negentropy.Item{Timestamp: uint64(max(createdAt, 0)), ID: id})
		return len(items) <= maxSyncRecords
	})
	if err != nil {
		return nil, nil, permanent(err)
	}
	if err := w.l.db.eachTombstone(func(id [32]byte, createdAt int64) {
		if createdAt >= f.Since && (!f.HasUntil || createdAt <= f.Until) {
			items = append(items, negentropy.Item{Timestamp: uint64(createdAt), ID: id})
		}
	}); err != nil {
		return nil, nil, permanent(err)
	}
	if len(items) > maxSyncRecords {
		return nil, nil, fmt.Errorf("%w: more than %d local events", errNoNegentropy, maxSyncRecords)
	}
	vec, err := negentropy.NewVector(items)
	if err != nil {
		return nil, nil, permanent(err)
	}
	in, err := negentropy.NewInitiator(vec, negentropy.Config{FrameSizeLimit: negFrameLimit, MaxRecords: maxSyncRecords, MaxDifferences: maxSyncRecords})
	if err != nil {
		return nil, nil, permanent(err)
	}
	msg, err := in.Initiate()
	if err != nil {
		return nil, nil, permanent(err)
	}
	id, ch, unsub := rc.subscribe("neg")
	defer unsub()
	notices, unwatch := rc.watchNotices()
	defer unwatch()
	rc.w.counter.rtts.Add(1)
	if err := rc.send(nostr.ClientMessage{Type: nostr.MsgNegOpen, SubID: id, Filters: []nostr.Filter{*f}, NegMsg: hex.EncodeToString(msg)}); err != nil {
		return nil, nil, err
	}
	for {
		m, err := rc.await(ch, notices)
		if err != nil {
			return nil, nil, err
		}
		switch m.Type {
		case nostr.MsgNotice, nostr.MsgNegErr, nostr.MsgClosed:
			return nil, nil, fmt.Errorf("%w (%s %q)", errNoNegentropy, m.Type, m.Text)
		case nostr.MsgNegMsg:
		default:
			continue
		}
		raw, err := hex.DecodeString(m.NegMsg)
		if err != nil {
			return nil, nil, fmt.Errorf("NEG-MSG from %s is not hex", rc.url)
		}
		step, err := in.Reconcile(raw)
		if err != nil {
			if errors.Is(err, negentropy.ErrTooManyDifferences) || errors.Is(err, negentropy.ErrTooManyRecords) {
				return nil, nil, fmt.Errorf("%w: %v", errNoNegentropy, err)
			}
			return nil, nil, fmt.Errorf("negentropy with %s: %w", rc.url, err)
		}
		need = append(need, step.Need...)
		if w.serve {
			have = append(have, step.Have...)
		}
		if step.Done() {
			_ = rc.send(nostr.ClientMessage{Type: nostr.MsgNegClose, SubID: id})
			return need, have, nil
		}
		rc.w.counter.rtts.Add(1)
		if err := rc.send(nostr.ClientMessage{Type: nostr.MsgNegMsg, SubID: id, NegMsg: hex.EncodeToString(step.Next)}); err != nil {
			return nil, nil, err
		}
	}
}

// fetch gets events by id, fetchParallel REQs at a time.
func (w *wake) fetch(rc *relayConn, f *nostr.Filter, ids []negentropy.ID) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, fetchParallel)
	)
	for start := 0; start < len(ids); start += fetchChunk {
		part := ids[start:min(start+fetchChunk, len(ids))]
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			q := nostr.Filter{IDs: make([][32]byte, len(part)), Limit: len(part), HasLimit: true}
			for i, id := range part {
				q.IDs[i] = id
			}
			if _, err := w.requestAndStore(rc, q, f); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// requestAndStore runs one REQ, keeps the events that are valid and match
// sub, stores them in one transaction and returns the oldest created_at
// and how many came.
//
// On a metered connection every valid event the home sent counts as
// events and bytes received from it (spec/leaf.md "Receipts"), in the
// transaction that stores them: one that does not match sub was still
// served.
func (w *wake) requestAndStore(rc *relayConn, q nostr.Filter, sub *nostr.Filter) (page, error) {
	var p page
	var evs []*nostr.Event
	var got, size uint64
	err := rc.request(q, func(ev *nostr.Event, n int) error {
		if w.l.verifyEvent(ev) != nil {
			return nil // a home that sends a bad event gets it ignored, and not counted
		}
		got, size = got+1, size+uint64(n)
		if !sub.Matches(ev) {
			return nil
		}
		p.add(ev.CreatedAt)
		evs = append(evs, ev)
		return nil
	})
	if got > 0 {
		c := w.countWith(rc, func(s *receipt.Side) {
			s.Received.Events += got
			s.Received.Bytes += size
		})
		n, serr := w.l.db.putEvents(evs, w.rank, w.l.cfg.MaxStoreBytes, c)
		if serr != nil {
			return p, permanent(serr)
		}
		var total int64
		w.add(func(s *Summary) {
			s.EventsFetched += int64(n)
			total = s.EventsFetched
		})
		w.l.progress.report("catchup", total, -1)
	}
	return p, err
}

// page is what one REQ returned.
type page struct {
	n      int
	oldest int64
}

func (p *page) add(createdAt int64) {
	if p.n == 0 || createdAt < p.oldest {
		p.oldest = createdAt
	}
	p.n++
}

// sinceWalk covers, newest first in pages, the ranges of created_at not
// caught up yet: the one since the last catch-up, and any a cut-short wake
// left. Progress is saved after every page, so the next wake goes on
// where this one stopped.
func (w *wake) sinceWalk(rc *relayConn, sub *subState, f *nostr.Filter, now int64) error {
	if err := w.saveSub(sub, func(s *subState) {
		lo := int64(0)
		if s.Covered > 0 {
			lo = max(0, s.Covered-int64(sinceOverlap/time.Second))
		}
		if now >= lo {
			s.Pending = append(s.Pending, timeRange{Lo: max(lo, f.Since), Hi: now})
		}
		s.Covered = max(s.Covered, now)
	}); err != nil {
		return permanent(err)
	}
	for len(sub.Pending) > 0 {
		r := sub.Pending[0]
		q := *f
		q.Since, q.Until, q.HasUntil = r.Lo, r.Hi, true
		if f.HasUntil {
			q.Until = min(q.Until, f.Until)
		}
		q.Limit, q.HasLimit = pageSize, true
		p, err := w.requestAndStore(rc, q, f)
		if err != nil {
			return err
		}
		if err := w.saveSub(sub, func(s *subState) {
			if len(s.Pending) == 0 {
				return
			}
			switch {
			case p.n == 0:
				s.Pending = s.Pending[1:]
			case p.oldest < r.Hi:
				s.Pending[0].Hi = p.oldest // that second again: its other events may not have fit
			default:
				// A whole page of one second: the relay's limit may hide
				// some of that second's events, which only NIP-77 finds.
				s.Pending[0].Hi = p.oldest - 1
			}
			if len(s.Pending) > 0 && s.Pending[0].Hi < s.Pending[0].Lo {
				s.Pending = s.Pending[1:]
			}
		}); err != nil {
			return permanent(err)
		}
	}
	return nil
}
