// Command khatru-backend is the gateway tests' private relay backend: a
// relay nobody in this project wrote (khatru on an eventstore v0.16.2
// badger store), started as its own process with its own data directory.
// It is a test helper, not a relay to deploy, and lives in its own module
// under testdata so that the fleetmesh module never depends on khatru.
//
// Versions (see spec/gateway.md, "Tested against"): khatru v0.17.0 parses
// messages with go-nostr v0.50.4, which refuses every filter with since,
// until or limit and every NEG-OPEN, so no catch-up could run against it.
// This module uses khatru v0.17.4, the last v0.17 release, with go-nostr
// v0.52.0 (whose NIP-77 envelope parser reads the label correctly; v0.51.4
// does not) and bytedance/sonic v1.15.5 (needed on Go 1.26).
//
// Knobs the tests need and bench/cmd/khatru-relay does not have:
// --negentropy serves NIP-77 (khatru's own implementation); --auth-writes
// and --auth-reads answer EVENT, REQ and NEG-OPEN from an unauthenticated
// connection with "auth-required:" (NIP-42); --block-kind refuses a kind
// with "blocked:"; --rate-limit-once answers each event's first publication
// with "rate-limited:". They make the gateway's answers to each OK and
// CLOSED prefix run against a relay it did not write.
//
// On start it prints "relay ws://HOST:PORT" on stdout. SIGTERM and SIGINT
// stop the listener and close the store, so nothing it acknowledged is lost
// across a switch-off.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/fiatjaf/eventstore/badger"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	data := flag.String("data", "", "data directory of the event store (required)")
	negentropy := flag.Bool("negentropy", false, "serve NIP-77 negentropy sync")
	var k knobs
	flag.BoolVar(&k.authWrites, "auth-writes", false, "require NIP-42 AUTH before accepting any EVENT")
	flag.BoolVar(&k.authReads, "auth-reads", false, "require NIP-42 AUTH before serving any REQ or NEG-OPEN")
	flag.IntVar(&k.blockKind, "block-kind", -1, "refuse events of this kind with \"blocked:\"")
	flag.BoolVar(&k.rateLimitOnce, "rate-limit-once", false, "answer the first publication of each event with \"rate-limited:\"")
	flag.Parse()
	if err := run(*listen, *data, *negentropy, k); err != nil {
		fmt.Fprintln(os.Stderr, "khatru-backend:", err)
		os.Exit(1)
	}
}

// knobs are the test switches.
type knobs struct {
	authWrites, authReads bool
	blockKind             int
	rateLimitOnce         bool
}

// maxNegentropyRecords bounds the events one NEG-OPEN loads.
const maxNegentropyRecords = 100000

// maxRateLimited bounds the ids --rate-limit-once remembers.
const maxRateLimited = 100000

func run(listen, data string, negentropy bool, k knobs) error {
	if data == "" {
		return errors.New("--data DIR is required")
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// eventstore's badger backend sizes a NIP-77 query's buffers by its
	// negentropy limit, 16,777,216 by default, which costs seconds per
	// NEG-OPEN on a small machine; a khatru operator lowers it the same way.
	store := &badger.BadgerBackend{Path: data, MaxLimitNegentropy: maxNegentropyRecords}
	if err := store.Init(); err != nil {
		return fmt.Errorf("open badger store in %s: %w", data, err)
	}
	defer store.Close()

	relay := khatru.NewRelay()
	relay.Info.Name = "khatru-backend (fleetmesh gateway tests)"
	relay.Log = log.New(os.Stderr, "[khatru-backend] ", log.LstdFlags)
	relay.Negentropy = negentropy
	relay.StoreEvent = append(relay.StoreEvent, store.SaveEvent)
	relay.QueryEvents = append(relay.QueryEvents, store.QueryEvents)
	relay.CountEvents = append(relay.CountEvents, store.CountEvents)
	relay.DeleteEvent = append(relay.DeleteEvent, store.DeleteEvent)
	relay.ReplaceEvent = append(relay.ReplaceEvent, store.ReplaceEvent)
	if k.authWrites {
		relay.RejectEvent = append(relay.RejectEvent, func(ctx context.Context, _ *nostr.Event) (bool, string) {
			if khatru.GetAuthed(ctx) == "" {
				return true, "auth-required: this backend takes events only from authenticated clients"
			}
			return false, ""
		})
	}
	if k.authReads {
		relay.RejectFilter = append(relay.RejectFilter, func(ctx context.Context, _ nostr.Filter) (bool, string) {
			if khatru.GetAuthed(ctx) == "" {
				return true, "auth-required: this backend serves only authenticated clients"
			}
			return false, ""
		})
	}
	if k.blockKind >= 0 {
		relay.RejectEvent = append(relay.RejectEvent, func(_ context.Context, ev *nostr.Event) (bool, string) {
			if ev.Kind == k.blockKind {
				return true, fmt.Sprintf("blocked: kind %d is not taken here", ev.Kind)
			}
			return false, ""
		})
	}
	if k.rateLimitOnce {
		var mu sync.Mutex
		seen := make(map[string]bool)
		relay.RejectEvent = append(relay.RejectEvent, func(_ context.Context, ev *nostr.Event) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			if seen[ev.ID] || len(seen) >= maxRateLimited {
				return false, ""
			}
			seen[ev.ID] = true
			return true, "rate-limited: slow down"
		})
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: relay, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("relay ws://%s\n", ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
