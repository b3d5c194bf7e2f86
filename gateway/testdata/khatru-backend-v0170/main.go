// Command khatru-backend-v0170 is a gateway test backend that cannot parse
// the gateway's usual REQs: khatru v0.17.0, whose go-nostr v0.50.4 parser
// answers any filter with limit, since or until (and every NEG-OPEN) with
// NOTICE "failed to parse envelope ..." instead of EOSE (spec/gateway.md,
// "A backend that refuses REQs"). That bug is the point: the gateway must detect it, degrade to
// filters it parses and report it. It is a test helper in its own module,
// beside khatru-backend (the v0.17.4 one), so the fleetmesh module never
// depends on khatru.
//
// --refuse-reqs closes every REQ with "restricted:", a backend that serves
// no reads in any shape, so the gateway's last resort (one ERROR, the
// backend's words in /metrics and /healthz, backoff, and the mesh → backend
// direction still carried) runs against a real relay too.
//
// On start it prints "relay ws://HOST:PORT" on stdout; SIGTERM and SIGINT
// stop it and close the store.
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
	"syscall"
	"time"

	"github.com/fiatjaf/eventstore/badger"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	data := flag.String("data", "", "data directory of the event store (required)")
	refuse := flag.Bool("refuse-reqs", false, "close every REQ with \"restricted:\"")
	flag.Parse()
	if err := run(*listen, *data, *refuse); err != nil {
		fmt.Fprintln(os.Stderr, "khatru-backend-v0170:", err)
		os.Exit(1)
	}
}

func run(listen, data string, refuse bool) error {
	if data == "" {
		return errors.New("--data DIR is required")
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	store := &badger.BadgerBackend{Path: data}
	if err := store.Init(); err != nil {
		return fmt.Errorf("open badger store in %s: %w", data, err)
	}
	defer store.Close()

	relay := khatru.NewRelay()
	relay.Info.Name = "khatru v0.17.0 backend (fleetmesh gateway tests)"
	relay.Log = log.New(os.Stderr, "[khatru-v0.17.0] ", log.LstdFlags)
	relay.StoreEvent = append(relay.StoreEvent, store.SaveEvent)
	relay.QueryEvents = append(relay.QueryEvents, store.QueryEvents)
	relay.DeleteEvent = append(relay.DeleteEvent, store.DeleteEvent)
	relay.ReplaceEvent = append(relay.ReplaceEvent, store.ReplaceEvent)
	if refuse {
		relay.RejectFilter = append(relay.RejectFilter, func(context.Context, nostr.Filter) (bool, string) {
			return true, "restricted: this backend serves no reads"
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
