package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"fleetmesh.org/fleetmesh/internal/pgtest"
	"fleetmesh.org/fleetmesh/nostr"
)

// TestReplicaReads runs a store whose queries read a streaming replica
// (Options.ReadURL) while it writes to the primary: a REQ answered on the
// replica mid-writes and then followed on the primary's feed from the
// replica's head sees every event exactly once, and the replica comes to
// serve every event.
func TestReplicaReads(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := pgtest.BinDir(); err != nil {
		t.Skip(err) // scripts/test.sh installs it, so CI runs this
	}
	primary, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Stop()
	url, err := primary.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := primary.StartReplica(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Stop()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{t: t, url: url}
	fx.now.Store(1_700_000_000)
	k, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	fx.keys = []nostr.SecretKey{k}
	fx.opts = Options{ReadURL: replica.URL(cfg.Database)}
	fx.s = fx.open()
	defer fx.s.Close()

	evs := makeNotes(fx, 100)
	done := make(chan map[[32]byte]bool)
	go func() { done <- writeAll(ctx, t, []*Store{fx.s}, evs, false) }()
	// The REQ is answered on the replica, its live part on the primary's
	// feed from the replica's head.
	f := nostr.Filter{Kinds: []int{1}}
	storedThenLive(ctx, t, fx.s, f, 20, done)
	// The replica catches up and serves every event.
	for {
		n, _, err := fx.s.Count(ctx, &f)
		if err != nil {
			t.Fatal(err)
		}
		if n == int64(len(evs)) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the replica serves %d events of %d", n, len(evs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
