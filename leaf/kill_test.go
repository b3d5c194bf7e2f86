package leaf

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/netem"
	"fleetmesh.org/fleetmesh/nostr"
)

// childEnv names the leaf directory a re-executed test binary runs one
// wake in (TestKill9MidWake's child process).
const childEnv = "FLEETMESH_LEAF_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(childWake(dir))
	}
	os.Exit(m.Run())
}

// childWake is the child: one wake of the leaf in dir, as a phone's
// background task would run it, until the parent kills it.
func childWake(dir string) int {
	cfg := NewConfig(dir)
	if n, err := strconv.Atoi(os.Getenv(childBatchEnv)); err == nil {
		cfg.DeliveryBatch = int64(n)
	}
	if n, err := strconv.Atoi(os.Getenv(childWindowEnv)); err == nil {
		cfg.WindowSecs = int64(n)
	}
	l, err := New(cfg, NewFileKeyStore(dir+"/leaf.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	fmt.Println(childWaking) // the parent times its kill from here
	s, err := l.Sync(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(s.JSON())
	return 0
}

// childWaking is the line the child prints as its wake starts.
const childWaking = "waking"

// childBatchEnv sets the child's DeliveryBatch, childWindowEnv its
// WindowSecs.
const (
	childBatchEnv  = "FLEETMESH_LEAF_CHILD_BATCH"
	childWindowEnv = "FLEETMESH_LEAF_CHILD_WINDOW"
)

// TestKill9MidWake kills a leaf process with SIGKILL at random points of
// its wakes, many times over: afterwards the messages stored are exactly
// the ones queued (none lost, none twice) and every event of the outbox
// reached the home. Runs: 12 by default, FLEETMESH_LEAF_KILL_RUNS=N for
// a longer soak.
func TestKill9MidWake(t *testing.T) {
	runs := 12
	if v, err := strconv.Atoi(os.Getenv("FLEETMESH_LEAF_KILL_RUNS")); err == nil && v > 0 {
		runs = v
	}
	h, p, l := pairedLeaf(t, nil)
	dir := l.cfg.Dir
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	snd := newSender(t)
	var queued []string
	var evs []*nostr.Event
	// Before each run, more work arrives: messages at the home, events
	// written offline into the outbox.
	more := func() {
		queued = append(queued, h.queue(t, snd, l.DID(), 40)...)
		lw, err := New(NewConfig(dir), NewFileKeyStore(dir+"/leaf.key"))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range signedEvents(t, 3, time.Now().Unix()-100, 3) {
			if err := lw.Publish(ev.AppendJSON(nil)); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		if err := lw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A slow path spreads the wake over time, so kills land in pickup,
	// in the outbox and between them.
	p.SetConfig(netem.Config{Latency: 25 * time.Millisecond})
	// A kill counts as mid-wake when it lands after the child printed
	// that its wake starts and before it printed the summary.
	killed := 0
	for i := 0; i < runs; i++ {
		more()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dir, childBatchEnv+"=20")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waking, summarized := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for n := 0; sc.Scan(); n++ {
				switch n {
				case 0:
					close(waking)
				case 1:
					close(summarized)
				}
			}
			done <- cmd.Wait()
		}()
		select {
		case <-waking:
		case err := <-done:
			t.Fatalf("the leaf process exited before its wake: %v", err)
		}
		select {
		case <-time.After(time.Duration(rand.IntN(500)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			select {
			case <-summarized:
			default:
				killed++
			}
		case <-done:
		}
	}
	t.Logf("%d of %d wakes killed with SIGKILL mid-wake", killed, runs)
	if killed == 0 {
		t.Fatal("no wake was killed mid-wake: the test tested nothing")
	}
	slices.Sort(queued)
	l2, err := New(NewConfig(dir), NewFileKeyStore(dir+"/leaf.key"))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for i := 0; i < 3; i++ {
		if s := mustSync(t, l2); s.CaughtUp && s.OutboxLeft == 0 {
			break
		}
	}
	if got := storedMessageIDs(t, l2); !slices.Equal(got, queued) {
		t.Fatalf("stored %d messages, queued %d: the sets differ", len(got), len(queued))
	}
	if raw, _ := l2.Outbox(); string(raw) != "[]" {
		t.Fatalf("outbox still holds %s", raw)
	}
	if raw, _ := l2.Rejected(); string(raw) != "[]" {
		t.Fatalf("the home refused outbox entries: %s", raw)
	}
	// The set of the home's events by the outbox's authors is the set
	// written: none lost, none made up.
	var want, got []string
	f := nostr.Filter{}
	for _, ev := range evs {
		want = append(want, ev.IDHex())
		f.Authors = append(f.Authors, ev.PubKey)
	}
	if err := h.st.Query(t.Context(), &f, 10*len(evs), func(ev *nostr.Event) bool {
		got = append(got, ev.IDHex())
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the home holds %d events of the outbox's authors, %d were written: the sets differ", len(got), len(want))
	}
}
