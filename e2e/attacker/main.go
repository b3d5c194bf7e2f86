// Command attacker is the adversary of the e2e package's hostile-load
// suite (e2e/hostile_test.go, spec/limits.md). It runs one attack on a
// fleetmesh node for a fixed time and prints, as one JSON object, what it
// got: a sentence for the table and the counts the suite checks against
// the node's bounds.
//
// It is a program of its own so that the attack runs in another process
// than the honest clients it is measured against: another Go scheduler
// and garbage collector, built without the race detector, and given a CPU
// share the suite bounds (nice, GOMAXPROCS). Only the tests build it; it
// is not part of a release.
//
// Every attack comes from one loopback address (-from), or from a libp2p
// host on it, and every loop ends when the duration does. It also seeds the node's store for the
// suite (-attack seed), which is no attack. The dishonest accountant
// (-attack accountant, -seed the node's window in seconds) lies in the
// accounting protocols; -attack descriptors floods a relay (-relay) with
// -seed node announcements.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"
)

// result is what the attacker prints.
type result struct {
	Got    string           `json:"got"`
	Counts map[string]int64 `json:"counts"`
}

// target is the node under attack.
type target struct {
	relay string // ws://host:port
	http  string // http://host:port
	mesh  string // the mesh multiaddr, with /p2p/
	leaf  string // a DIDComm recipient the node mediates for
	node  string // the node's DID
	seed  int    // events in the store at the start
	from  string // the loopback address the attack comes from
	// messages, if not 0, ends an attack that counts its messages once
	// it has sent that many (the dishonest accountant).
	messages int64
}

var attacks = map[string]func(ctx context.Context, t target) result{
	"conn-flood":  connFlood,
	"slowloris":   slowloris,
	"sub-flood":   subFlood,
	"req-loop":    reqLoop,
	"neg-loop":    negLoop,
	"frames":      frames,
	"didcomm":     didcommFlood,
	"streams":     streams,
	"pex":         pex,
	"gossip":      gossip,
	"seed":        seedStore,
	"accountant":  accountantFlood,
	"descriptors": descriptorFlood,
}

func main() {
	var t target
	name := flag.String("attack", "", "the attack to run")
	dur := flag.Duration("duration", 3*time.Second, "how long to attack")
	flag.StringVar(&t.relay, "relay", "", "the node's relay URL (ws://...)")
	flag.StringVar(&t.http, "http", "", "the node's HTTP URL (http://...)")
	flag.StringVar(&t.mesh, "mesh", "", "the node's mesh multiaddr, with /p2p/")
	flag.StringVar(&t.leaf, "leaf", "", "a DIDComm recipient the node mediates for")
	flag.StringVar(&t.node, "node", "", "the node's DID")
	flag.IntVar(&t.seed, "seed", 0, "events in the node's store at the start")
	flag.StringVar(&t.from, "from", "127.0.0.1", "the loopback address to attack from")
	flag.Int64Var(&t.messages, "messages", 0, "stop once this many attack messages are sent (0: at the duration)")
	flag.Parse()
	run, ok := attacks[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "attacker: unknown attack %q\n", *name)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	res := run(ctx, t)
	if res.Counts == nil {
		res.Counts = map[string]int64{}
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "attacker:", err)
		os.Exit(1)
	}
}

// workers runs f in n goroutines until they return.
func workers(ctx context.Context, n int, f func(ctx context.Context, w int)) {
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Go(func() { f(ctx, w) })
	}
	wg.Wait()
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
