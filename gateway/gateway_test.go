package gateway

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// newTestGateway wires a gateway to a real store, relay and policy, with no
// backend connection: for the mesh-side paths, which need none.
func newTestGateway(t *testing.T, change ...func(*Settings)) (*Gateway, *relay.Relay, *store.Store) {
	t.Helper()
	return newTestGatewayLogged(t, nil, prometheus.NewRegistry(), change...)
}

// newTestGatewayLogged is newTestGateway with log as the gateway's logger
// (nil: none) and its metrics, the relay's and the policy's in reg.
func newTestGatewayLogged(t *testing.T, log *slog.Logger, reg *prometheus.Registry, change ...func(*Settings)) (*Gateway, *relay.Relay, *store.Store) {
	t.Helper()
	home := t.TempDir()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	policy, err := boundary.New(nil, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	rl := relay.New(relay.DefaultConfig(), st, nil, reg)
	cfg := DefaultConfig()
	cfg.Backend = "ws://127.0.0.1:9"
	cfg.CarryEverything = true
	s, err := cfg.Settings(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range change {
		c(&s)
	}
	key, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Options{Settings: s, Home: home, Key: key, Relay: rl, Store: st, Policy: policy, Registry: reg, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return g, rl, st
}

func makeEvent(t *testing.T, k nostr.SecretKey, createdAt int64, kind int, content string, tags nostr.Tags) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{CreatedAt: createdAt, Kind: kind, Content: content, Tags: tags}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

const testKey = "nsec1qpzry9x8gf2tvdw0s3jn54khce6mua7lqpzry9x8gf2tvdw0s3jn54khce6mu"

// TestMeshToBackendHook stores events on the node as if they came from the
// mesh, from a client and from the backend: only allowed ones from the
// first two are queued for the backend.
func TestMeshToBackendHook(t *testing.T) {
	g, rl, _ := newTestGateway(t)
	ctx := context.Background()
	k, _ := nostr.GenerateSecretKey()
	const now = 1_800_000_000
	g.out.complete(now + 100) // as if a catch-up had finished after these events
	allowedMesh := makeEvent(t, k, now, 1, "from the mesh", nil)
	allowedClient := makeEvent(t, k, now+1, 1, "from a client", nil)
	fromBackend := makeEvent(t, k, now+2, 1, "from the backend", nil)
	forbidden := []*nostr.Event{
		makeEvent(t, k, now, 1, "key "+strings.ToUpper(testKey), nil),
		makeEvent(t, k, now, 1, "split", nostr.Tags{{"x", testKey[:12]}, {"x", testKey[12:]}}),
		makeEvent(t, k, now, 20000, "ephemeral", nil),
		makeEvent(t, k, now, 29999, "ephemeral", nil),
		makeEvent(t, k, now, 27235, "nip98", nil),
		makeEvent(t, k, now, 1, "bill", nostr.Tags{{"fleetmesh-boundary", "billing"}}),
	}
	for _, ev := range forbidden {
		if _, err := rl.AddEvent(ctx, ev, relay.FromMesh); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		ev   *nostr.Event
		from relay.Origin
	}{{allowedMesh, relay.FromMesh}, {allowedClient, relay.FromClient}, {fromBackend, relay.FromBackend}} {
		if _, err := rl.AddEvent(ctx, step.ev, step.from); err != nil {
			t.Fatal(err)
		}
	}
	// A duplicate fires no hook and queues nothing twice.
	if _, err := rl.AddEvent(ctx, allowedMesh, relay.FromMesh); err != nil {
		t.Fatal(err)
	}
	var queued []string
	for _, ev := range g.queue.items {
		queued = append(queued, ev.Content)
	}
	if len(queued) != 2 || queued[0] != "from the mesh" || queued[1] != "from a client" {
		t.Fatalf("queued %q, want the mesh and client events only", queued)
	}
	if got := counterValue(t, g.m.refused.WithLabelValues(dirToBackend)); got != float64(len(forbidden)) {
		t.Fatalf("refused to_backend = %v, want %d", got, len(forbidden))
	}
	if got := g.out.value(); got != now {
		t.Fatalf("out cursor = %d, want it held at the oldest pending event %d", got, now)
	}
}

// TestIngestAppliesFiltersAndPolicy stores backend events through ingest.
func TestIngestAppliesFiltersAndPolicy(t *testing.T) {
	g, _, st := newTestGateway(t)
	g.s.ToMesh = []nostr.Filter{{Kinds: []int{1, 10002}}}
	ctx := context.Background()
	k, _ := nostr.GenerateSecretKey()
	const now = 1_800_000_000
	allowed := makeEvent(t, k, now-10, 10002, "relays", nil)
	replacement := makeEvent(t, k, now, 10002, "relays "+testKey, nil) // replaces allowed with key material
	otherKind := makeEvent(t, k, now, 7, "+", nil)
	bad := makeEvent(t, k, now, 1, "tampered", nil)
	bad.Content = "tampered!"
	for _, ev := range []*nostr.Event{allowed, replacement, otherKind, bad} {
		if err := g.ingest(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var stored []string
	st.Query(ctx, &nostr.Filter{}, 100, func(ev *nostr.Event) bool {
		stored = append(stored, ev.Content)
		return true
	})
	if len(stored) != 1 || stored[0] != "relays" {
		t.Fatalf("stored %q, want only the allowed replaceable version", stored)
	}
	if got := counterValue(t, g.m.carried.WithLabelValues(dirToMesh)); got != 1 {
		t.Fatalf("carried to_mesh = %v, want 1", got)
	}
	if len(g.queue.items) != 0 {
		t.Fatal("an event from the backend was queued back to it")
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
