package conformance_test

import (
	"context"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/conformance"
	"fleetmesh.org/fleetmesh/node"
)

// TestSuiteAgainstNode runs every check against a real node (its store,
// relay and boundary policy) on a loopback port.
func TestSuiteAgainstNode(t *testing.T) {
	h := node.Home{Dir: t.TempDir()}
	key, _, err := node.Init(h, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(h.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Relay.Listen = "127.0.0.1:0"
	// mDNS would multicast on the machine's network (class auto runs it
	// while the node is not found public).
	cfg.Mesh.MDNS = setting.Off
	ready := make(chan string, 1)
	n, err := node.Open(node.Options{Home: h, Config: cfg, Key: key, Ready: func(u string) { ready <- u }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	url := <-ready
	results, err := conformance.Run(context.Background(), &conformance.Target{URL: url, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(conformance.Names()) {
		t.Fatalf("%d results for %d checks", len(results), len(conformance.Names()))
	}
	for _, r := range results {
		if r.Err != nil || r.Skipped != "" {
			t.Errorf("%s: err=%v skipped=%q", r.Name, r.Err, r.Skipped)
		}
	}
}
