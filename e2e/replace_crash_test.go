package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// replaceIterations bounds the replaceable crash loop.
const replaceIterations = 4

// version is one version a writer made: its slot and created_at.
type version struct {
	slot string
	at   int64
}

// versionLog remembers every version the writers made, by event id.
type versionLog struct {
	mu   sync.Mutex
	byID map[string]version
}

// TestCrashReplaceable kills the node with SIGKILL while clients pipeline
// new versions of a replaceable (kind 0) and an addressable (kind 30000,
// d "x") event, many of which land in the same store batch. After every
// restart each slot must hold exactly one version, no older than the newest
// acknowledged one.
func TestCrashReplaceable(t *testing.T) {
	needBinary(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	home := newHome(t, nodeConfig(nil))
	type writer struct {
		u    *user
		kind int
		tags [][]string
	}
	var writers []writer
	for i := 0; i < 2; i++ {
		u, err := newUser()
		if err != nil {
			t.Fatal(err)
		}
		writers = append(writers, writer{u, 0, nil}, writer{u, 30000, [][]string{{"d", "x"}}})
	}
	versions := &versionLog{byID: map[string]version{}}
	acks := &ackLog{ids: map[string]bool{}, refused: map[string]int{}}
	// Every version has a later created_at than the one before, all in the
	// past so none is refused as future.
	var clock int64 = time.Now().Unix() - 1_000_000
	var clockMu sync.Mutex
	for iter := 0; iter <= replaceIterations; iter++ {
		n := startNode(t, home)
		if iter > 0 {
			for _, w := range writers {
				checkSlot(t, n, w.u, w.kind, versions, acks, iter)
			}
		}
		if iter == replaceIterations {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
		var wg sync.WaitGroup
		for _, w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				publish(ctx, n.url, func() (*event, error) {
					clockMu.Lock()
					clock++
					at := clock
					clockMu.Unlock()
					e, err := w.u.signAt(at, w.kind, randomContent("version"), w.tags)
					if err == nil {
						versions.mu.Lock()
						versions.byID[e.ID] = version{slot: slotName(w.u, w.kind), at: at}
						versions.mu.Unlock()
					}
					return e, err
				}, acks)
			}()
		}
		waitForAcks(t, n, acks)
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		n.kill()
		cancel()
		wg.Wait()
	}
}

// checkSlot asks for the writer's slot and checks it holds one version, at
// least as new as every acknowledged version of that writer and kind.
func checkSlot(t *testing.T, n *node, u *user, kind int, versions *versionLog, acks *ackLog, iter int) {
	t.Helper()
	acks.mu.Lock()
	versions.mu.Lock()
	var newestAcked int64
	slot := slotName(u, kind)
	for id := range acks.ids {
		if v, ok := versions.byID[id]; ok && v.slot == slot && v.at > newestAcked {
			newestAcked = v.at
		}
	}
	versions.mu.Unlock()
	acks.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
	defer cancel()
	events, err := query(ctx, n.url, map[string]any{"authors": []string{u.pubHex}, "kinds": []int{kind}})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 {
		t.Fatalf("after kill %d: kind %d slot holds %d versions, want exactly 1", iter, kind, len(events))
	}
	if events[0].CreatedAt < newestAcked {
		t.Fatalf("after kill %d: kind %d slot holds the version of created_at %d, older than the acknowledged %d",
			iter, kind, events[0].CreatedAt, newestAcked)
	}
}

// slotName names a writer's replaceable slot.
func slotName(u *user, kind int) string { return fmt.Sprintf("%s:%d", u.pubHex, kind) }
