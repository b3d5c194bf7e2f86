package e2e

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"
)

// publishers runs crashPublishers clients, each with a fresh user, that
// publish the events gen makes for their user to url until ctx ends or
// their connections break; wait returns when all have stopped.
func publishers(ctx context.Context, t *testing.T, url string, acks *ackLog, gen func(u *user) (*event, error)) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < crashPublishers; i++ {
		u, err := newUser()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			publish(ctx, url, func() (*event, error) { return gen(u) }, acks)
		}()
	}
	return wg.Wait
}

// plainNote makes a kind 1 note with unique content.
func plainNote(u *user) (*event, error) {
	return u.sign(1, randomContent("crash"), [][]string{{"t", "crash"}})
}

// waitForAcks polls until crashMinAcked new events were acknowledged, and
// fails the test if that does not happen within the phase budget.
func waitForAcks(t *testing.T, n *node, acks *ackLog) {
	t.Helper()
	deadline := time.Now().Add(crashPhaseBudget / 2)
	for acks.fresh() < crashMinAcked && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if acks.fresh() < crashMinAcked {
		t.Fatalf("only %d events acknowledged before the deadline; refusals %v\n%s", acks.fresh(), acks.refused, n.output())
	}
}

// TestGracefulShutdownKeepsAcknowledged sends SIGTERM while several clients
// are publishing (they hang up right after the signal), and checks that the
// node exits with status 0 and that every event it acknowledged is served
// after a restart.
func TestGracefulShutdownKeepsAcknowledged(t *testing.T) {
	home := newHome(t, nodeConfig(nil))
	acks := &ackLog{ids: map[string]bool{}, refused: map[string]int{}}
	for iter := 0; iter < 2; iter++ {
		n := startNode(t, home)
		checkAllServed(t, n, acks, iter)
		ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
		wait := publishers(ctx, t, n.url, acks, plainNote)
		waitForAcks(t, n, acks)
		if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		cancel()
		wait()
		if err := n.stop(); err != nil {
			t.Fatalf("SIGTERM while clients publish: exit %v\n%s", err, n.output())
		}
	}
	n := startNode(t, home)
	checkAllServed(t, n, acks, 2)
	t.Logf("%d acknowledged events served after 2 SIGTERMs during publishing", len(acks.ids))
}

// shutdownSlack is how many in-flight windows TestShutdownStopsReading lets
// the relay acknowledge after SIGTERM: it legitimately keeps reading until
// its signal handler has run.
const shutdownSlack = 4

// TestShutdownStopsReading sends SIGTERM while clients keep publishing and
// checks that the relay stops reading at the signal: each publisher keeps at
// most crashInFlight events unacknowledged, so a relay that stops reading
// acknowledges about that many per publisher after SIGTERM, then closes the
// connections and exits with status 0.
func TestShutdownStopsReading(t *testing.T) {
	home := newHome(t, nodeConfig(nil))
	acks := &ackLog{ids: map[string]bool{}, refused: map[string]int{}}
	n := startNode(t, home)
	ctx, cancel := context.WithTimeout(context.Background(), 2*stopTimeout)
	defer cancel()
	wait := publishers(ctx, t, n.url, acks, plainNote)
	waitForAcks(t, n, acks)
	before := acks.total()
	err := n.stop()
	cancel()
	wait()
	if err != nil {
		t.Fatalf("SIGTERM while clients publish: exit %v\n%s", err, n.output())
	}
	if after := acks.total() - before; after > shutdownSlack*crashPublishers*crashInFlight {
		t.Errorf("relay kept reading after SIGTERM: %d events acknowledged after the signal, at most %d were in flight",
			after, crashPublishers*crashInFlight)
	}
	n = startNode(t, home)
	checkAllServed(t, n, acks, 1)
}
