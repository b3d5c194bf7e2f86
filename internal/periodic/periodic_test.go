package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunTimedRounds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, 0, time.Millisecond, nil, func() {
			if n.Add(1) == 5 {
				cancel()
			}
		})
	}()
	<-done
	if got := n.Load(); got != 5 {
		t.Fatalf("ran %d rounds after the context ended at 5", got)
	}
}

func TestRunWake(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := make(chan struct{})
	ran := make(chan struct{})
	go Run(ctx, time.Hour, time.Hour, wake, func() { ran <- struct{}{} })
	for i := range 3 {
		wake <- struct{}{}
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatalf("wake %d started no round", i)
		}
	}
}

func TestRunStopsBeforeFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Run(ctx, time.Hour, time.Hour, nil, func() { t.Error("a round ran after the context ended") })
}
