package meshsync

import "sync/atomic"

// Counters are totals over the sessions this node started, for /metrics.
type Counters struct {
	// Sessions counts sessions started; Failed those that ended in an
	// error (a peer unreachable, a refusal, a timeout).
	Sessions, Failed uint64
	// Rounds counts negentropy round trips; Fetched and Pushed the events
	// fetched from peers and accepted by them.
	Rounds, Fetched, Pushed uint64
}

type counters struct {
	sessions, failed, rounds, fetched, pushed atomic.Uint64
}

func (c *counters) record(st Stats, err error) {
	c.sessions.Add(1)
	if err != nil {
		c.failed.Add(1)
	}
	c.rounds.Add(uint64(st.Rounds))
	c.fetched.Add(uint64(st.Fetched))
	c.pushed.Add(uint64(st.Pushed))
}

// Counters returns the totals so far.
func (s *Service) Counters() Counters {
	c := &s.stats
	return Counters{
		Sessions: c.sessions.Load(), Failed: c.failed.Load(),
		Rounds: c.rounds.Load(), Fetched: c.fetched.Load(), Pushed: c.pushed.Load(),
	}
}
