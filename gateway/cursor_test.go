package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestCatchUpOldCreatedAt is the crash the created_at cursors could not
// survive: the gateway has caught up and written its cursors (at about
// now); then, before a crash, an event with a created_at far older than
// the cursor minus overlap arrives on each side without crossing (on the
// backend, and in the local store with nothing queued: the queue died with
// the process). A gateway started again from those cursors must carry
// both. With NIP-77 it does: the reconciliation covers each filter over
// all time, not since the cursor. Without it, the full walk after the
// since windows does (walk.go); before it, the second case failed.
func TestCatchUpOldCreatedAt(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		flags        []string
	}{
		{"NIP-77", "negentropy", []string{"--negentropy"}},
		{"since windows and the full walk", "since", nil},
	} {
		t.Run(tc.name, func(t *testing.T) { catchUpOldCreatedAt(t, tc.method, tc.flags) })
	}
}

func catchUpOldCreatedAt(t *testing.T, method string, flags []string) {
	backend := startKhatru(t, flags...)
	g, rl, st := newTestGateway(t, func(s *Settings) {
		s.Backend = backend.url()
		s.RetryMin, s.RetryMax = 20*time.Millisecond, 200*time.Millisecond
	})
	run := func(g *Gateway) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- g.Run(ctx) }()
		return func() {
			cancel()
			if err := <-ran; err != nil {
				t.Error(err)
			}
		}
	}
	stop := run(g)
	waitFor(t, "first catch-up", func() bool {
		return counterValue(t, g.m.catchups.WithLabelValues(dirToBackend, method)) >= 1
	})
	waitFor(t, "cursors written", func() bool {
		c, err := g.state.load()
		return err == nil && c.In > 0 && c.Out > 0
	})
	stop()

	writer, _ := nostr.GenerateSecretKey()
	author, _ := nostr.GenerateSecretKey()
	old := time.Now().Add(-48 * time.Hour).Unix() // far behind cursor − overlap (10m)
	onBackend := makeEvent(t, author, old, 1, "arrived at the backend just before the crash", nil)
	if m := dialClient(t, backend.url(), writer).publish(onBackend); !m.OK {
		t.Fatalf("backend refused: %s", m.Text)
	}
	onMesh := makeEvent(t, author, old, 1, "stored locally just before the crash, never queued", nil)
	if _, err := st.Save(context.Background(), onMesh); err != nil {
		t.Fatal(err)
	}
	// More than one page of the walk in one second, below it: the walk's
	// pages must neither skip nor stall on a crowded second.
	crowd := [][32]byte{onMesh.ID}
	for i := range fetchChunk + 20 {
		ev := makeEvent(t, author, old-60, 1, fmt.Sprint("one of a crowded second ", i), nil)
		if _, err := st.Save(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		crowd = append(crowd, ev.ID)
	}

	// The restarted gateway: same home (cursors), same store and relay.
	again, err := New(Options{Settings: g.s, Home: filepath.Dir(g.state.path), Key: g.key, Relay: rl, Store: st, Policy: g.policy})
	if err != nil {
		t.Fatal(err)
	}
	defer run(again)()
	waitFor(t, "the old backend event on the mesh side", func() bool {
		found := false
		st.Query(context.Background(), &nostr.Filter{IDs: [][32]byte{onBackend.ID}}, 1, func(*nostr.Event) bool { found = true; return false })
		return found
	})
	waitFor(t, "the old mesh events on the backend", func() bool {
		return len(dialClient(t, backend.url(), writer).has(crowd)) == len(crowd)
	})
}
