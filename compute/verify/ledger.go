package verify

import (
	"container/list"
	"sync"
)

// Ledger is a requester's history of each executor: how many of its
// results were checked and agreed (the warm-up and audit rate follow
// it), its losses, the last job an audit checked, and its recent
// unchecked results. It is bounded: Recent results per executor and
// MaxExecutors executors, the least recently seen forgotten first (a
// forgotten executor warms up again). It lives in memory only: after a
// restart every executor warms up again, the safe direction. It is safe
// for concurrent use.
type Ledger struct {
	recent, max int

	mu  sync.Mutex
	m   map[string]*list.Element // of *entry
	lru *list.List               // front: most recently seen
}

type entry struct {
	did string
	ExecutorRecord
}

// ExecutorRecord is what a Ledger holds of one executor.
type ExecutorRecord struct {
	// Agreed counts its checked agreements since it last lost (a loser
	// warms up again).
	Agreed int
	// Losses counts the disputes it lost.
	Losses int
	// LastAudit is the id of the last job of its that an audit checked
	// and found right.
	LastAudit string
	// Recent holds its last unchecked results, oldest first, at most
	// Policy.Recent.
	Recent []JobRef
}

// NewLedger makes a ledger keeping recent unchecked results per
// executor for at most max executors.
func NewLedger(recent, max int) *Ledger {
	return &Ledger{recent: max1(recent), max: max1(max), m: map[string]*list.Element{}, lru: list.New()}
}

func max1(n int) int { return max(n, 1) }

// Agreed returns did's checked agreements since it last lost.
func (l *Ledger) Agreed(did string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[did]; ok {
		return e.Value.(*entry).Agreed
	}
	return 0
}

// agreed returns Agreed of each candidate, under one lock.
func (l *Ledger) agreed(cs []Candidate) []int {
	n := make([]int, len(cs))
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range cs {
		if e, ok := l.m[c.DID]; ok {
			n[i] = e.Value.(*entry).Agreed
		}
	}
	return n
}

// Executor returns a copy of what the ledger holds of did (the zero
// record for an executor it does not know).
func (l *Ledger) Executor(did string) ExecutorRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[did]
	if !ok {
		return ExecutorRecord{}
	}
	r := e.Value.(*entry).ExecutorRecord
	r.Recent = append([]JobRef(nil), r.Recent...)
	return r
}

// Len returns how many executors the ledger holds.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// get returns did's entry, making it (and forgetting the least recently
// seen beyond the bound) if needed. l.mu is held.
func (l *Ledger) get(did string) *entry {
	if e, ok := l.m[did]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*entry)
	}
	en := &entry{did: did}
	l.m[did] = l.lru.PushFront(en)
	for len(l.m) > l.max {
		old := l.lru.Back()
		l.lru.Remove(old)
		delete(l.m, old.Value.(*entry).did)
	}
	return en
}

// Record records a job's final verdict (call it once per job, after any
// audit Judge asked for): Agreed executors count one more agreement
// (and the job as their last audit when Audited), Unchecked ones keep
// the job among their recent results, and each loser's agreements go
// to zero (it warms up again) while its recent unchecked results are
// handed back in its Dispute's Recheck and forgotten. It returns v's
// disputes with Recheck filled. A verdict that still NeedAudit credits
// no one.
func (l *Ledger) Record(p Plan, v Verdict) []Dispute {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v.Outcome == OK && !v.NeedAudit {
		for _, did := range v.Agreed {
			e := l.get(did)
			e.Agreed++
			if v.Audited {
				e.LastAudit = p.JobID
			}
		}
		for _, did := range v.Unchecked {
			e := l.get(did)
			if len(e.Recent) == l.recent {
				copy(e.Recent, e.Recent[1:])
				e.Recent = e.Recent[:len(e.Recent)-1]
			}
			e.Recent = append(e.Recent, JobRef{JobID: p.JobID, Hash: v.Hash})
		}
	}
	out := make([]Dispute, len(v.Disputes))
	for i, d := range v.Disputes {
		e := l.get(d.Executor)
		e.Agreed = 0
		e.Losses++
		d.Recheck, e.Recent = e.Recent, nil
		out[i] = d
	}
	return out
}
