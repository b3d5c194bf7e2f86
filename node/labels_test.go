package node

import (
	"context"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/label"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// TestHeldEventsReachModeration: a node whose [labels] policy is hold
// accepts the events of an author it labelled spam and lists them in its
// NIP-86 moderation queue (listeventsneedingmoderation), once however
// often they arrive; events of other authors are not listed.
func TestHeldEventsReachModeration(t *testing.T) {
	n, key, _ := serveNode(t, slog.LevelWarn, func(cfg *config.Config) {
		cfg.Iroh.Enabled = false
		cfg.Labels.Policy = label.ActionHold
	})
	ctx := context.Background()

	spammer, _ := nostr.GenerateSecretKey()
	pk := spammer.PubKey()
	lev, err := label.New(key, n.labels.sk, label.Spam, label.Target{Kind: label.Author, Value: hex.EncodeToString(pk[:])}, "", time.Now().Unix(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.relay.AddEvent(ctx, lev, relay.FromClient); err != nil {
		t.Fatalf("the node's own label: %v", err)
	}
	spam := note(t, spammer, "buy now")
	other, _ := nostr.GenerateSecretKey()
	fine := note(t, other, "hello")
	for range 3 { // as the mesh may deliver it, more than once
		if _, err := n.relay.AddEvent(ctx, spam, relay.FromClient); err != nil {
			t.Fatalf("a held event is accepted, got %v", err)
		}
	}
	if _, err := n.relay.AddEvent(ctx, fine, relay.FromClient); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the held event in the moderation queue", func() bool {
		held, err := n.lists.Held()
		return err == nil && len(held) > 0
	})
	held, err := n.lists.Held()
	if err != nil || len(held) != 1 || held[0].Key != spam.IDHex() {
		t.Fatalf("moderation queue %+v (err %v): want only %s", held, err, spam.IDHex())
	}
	if want := "labels: author labelled spam by 1 labeller(s)"; len(held[0].Reason) < len(want) || held[0].Reason[:len(want)] != want {
		t.Fatalf("queued with reason %q, want it to start %q", held[0].Reason, want)
	}
}
