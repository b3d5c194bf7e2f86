// Package periodic runs a node's background rounds: a function called on a
// schedule, and at once when something asks for it, until its context ends.
// Every "do this every interval" loop of the node (anti-entropy rounds,
// descriptor refreshes, cursor flushes, dashboard samples, accounting
// windows, address-book saves) runs on it, so their timing rules are
// written and tested once. It is not a scheduler of many jobs, and it does
// not run a round concurrently with itself.
package periodic

import (
	"context"
	"time"
)

// Run calls round after first, then again interval after each timed round
// ends, and at once whenever wake delivers (a nil wake never does), until
// ctx ends; no round starts once ctx has ended. A round that wake starts leaves the timer as it is, so a busy
// wake channel cannot starve the timed rounds. Measuring the interval from
// the end of a round, rather than ticking at a fixed rate, keeps a slow
// round from being followed at once by the next.
func Run(ctx context.Context, first, interval time.Duration, wake <-chan struct{}, round func()) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return
			}
			round()
			t.Reset(interval)
		case <-wake:
			if ctx.Err() != nil {
				return
			}
			round()
		}
	}
}
