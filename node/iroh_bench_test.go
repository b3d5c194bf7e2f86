package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/iroh"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// TestIrohVsLibp2pBench measures, in one run, a first sync of the same
// events from one node to two empty ones, one over iroh and one over
// libp2p QUIC: connection set-up time, sync time and events per second,
// the CPU and memory of the iroh helpers, and the CPU of this process
// (the Go side of both nodes in the session) during each sync. It only
// reports
// (docs/benchmarks/iroh.md); FLEETMESH_IROH_BENCH=N runs it with N events.
func TestIrohVsLibp2pBench(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FLEETMESH_IROH_BENCH"))
	if n <= 0 {
		t.Skip("set FLEETMESH_IROH_BENCH=<events> to run the iroh vs libp2p benchmark")
	}
	quic := []string{"/ip4/127.0.0.1/udp/0/quic-v1"}
	a := benchNode(t, quic)
	k, _ := nostr.GenerateSecretKey()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := a.n.Relay().AddEvent(context.Background(), note(t, k, fmt.Sprintf("bench %d", i)), relay.FromClient); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	info, _ := a.n.Iroh()
	aAddr := iroh.Addr{ID: info.ID, Addrs: info.Addrs}
	bIroh := benchNode(t, nil)
	bQUIC := benchNode(t, quic)
	ctx := context.Background()
	f := nostr.Filter{}

	// Warm the serving node's store, so neither transport meets it cold.
	if err := a.n.Store().Query(ctx, &f, n, func(*nostr.Event) bool { return true }); err != nil {
		t.Fatal(err)
	}
	var irohSetup, irohSync, quicSetup, quicSync, cpu0, cpu1, goIroh, goQUIC time.Duration
	var rss0 int
	runIroh := func() {
		// iroh: set-up is the first stream on a new connection.
		ep := bIroh.n.IrohEndpoint()
		cpu0 = helperUsage(t, bIroh)
		start := time.Now()
		s, err := ep.Dial(ctx, aAddr, meshsync.ProtocolID)
		if err != nil {
			t.Fatal(err)
		}
		irohSetup = time.Since(start)
		s.Close()
		bIroh.n.mesh.sync.SetDialer(func(ctx context.Context, _ peer.ID) (meshsync.Stream, error) {
			return ep.Dial(ctx, aAddr, meshsync.ProtocolID)
		})
		start = time.Now()
		go0 := processCPU(t)
		st, err := bIroh.n.mesh.sync.SyncWith(ctx, a.key.PeerID(), f)
		irohSync = time.Since(start)
		goIroh = processCPU(t) - go0
		if err != nil || st.Fetched != n {
			t.Fatalf("iroh sync: %+v %v", st, err)
		}
		cpu1 = helperUsage(t, bIroh)
		rss0 = helperRSS(t, bIroh)
	}
	runQUIC := func() {
		// libp2p QUIC: set-up is Connect.
		h := bQUIC.n.Mesh().Host()
		start := time.Now()
		if err := h.Connect(ctx, peer.AddrInfo{ID: a.key.PeerID(), Addrs: a.n.Mesh().Host().Addrs()}); err != nil {
			t.Fatal(err)
		}
		quicSetup = time.Since(start)
		bQUIC.n.mesh.sync.SetDialer(nil)
		start = time.Now()
		go0 := processCPU(t)
		st, err := bQUIC.n.mesh.sync.SyncWith(ctx, a.key.PeerID(), f)
		quicSync = time.Since(start)
		goQUIC = processCPU(t) - go0
		if err != nil || st.Fetched != n {
			t.Fatalf("libp2p sync: %+v %v", st, err)
		}
	}
	// FLEETMESH_IROH_BENCH_ORDER=libp2p-first runs libp2p first, so runs
	// can alternate which transport meets the serving node's cold cache.
	if os.Getenv("FLEETMESH_IROH_BENCH_ORDER") == "libp2p-first" {
		runQUIC()
		runIroh()
	} else {
		runIroh()
		runQUIC()
	}
	t.Logf("order %q", os.Getenv("FLEETMESH_IROH_BENCH_ORDER"))
	t.Logf("events %d", n)
	t.Logf("set-up: iroh %v, libp2p QUIC %v", irohSetup.Round(time.Microsecond), quicSetup.Round(time.Microsecond))
	t.Logf("sync: iroh %v (%.0f events/s), libp2p QUIC %v (%.0f events/s), iroh/libp2p time %.2fx",
		irohSync.Round(time.Millisecond), float64(n)/irohSync.Seconds(),
		quicSync.Round(time.Millisecond), float64(n)/quicSync.Seconds(), irohSync.Seconds()/quicSync.Seconds())
	t.Logf("iroh helper of the fetching node: %v CPU during set-up and sync, RSS %d KiB after", cpu1-cpu0, rss0)
	// libp2p's QUIC and TLS run in Go, iroh's in the helper: the
	// difference is what the socket copy costs the Go side, less that.
	t.Logf("Go side of both nodes (this process) during the sync: iroh %v, libp2p QUIC %v, iroh minus libp2p %v",
		goIroh.Round(time.Millisecond), goQUIC.Round(time.Millisecond), (goIroh - goQUIC).Round(time.Millisecond))
	t.Logf("iroh helper of the serving node: RSS %d KiB", helperRSS(t, a))
}

// benchNode is an irohNode that never syncs on its own (the benchmark
// runs the one session it measures), listening on listen for libp2p.
func benchNode(t *testing.T, listen []string) *irohNode {
	return startIrohNodeWith(t, func(c *config.Config) {
		c.Mesh.SyncInterval = setting.DurationOf(time.Hour)
		c.Mesh.Listen = listen
	})
}

// helperUsage is the CPU time (user + system) the node's helper used.
func helperUsage(t *testing.T, in *irohNode) time.Duration {
	pid := irohHelperPID(t, in.n.opts.Home.Path(IrohDir))
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	ut, _ := strconv.Atoi(fields[11])
	st, _ := strconv.Atoi(fields[12])
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
}

// processCPU is the CPU time (user + system) this process used so far.
func processCPU(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// helperRSS is the helper's resident memory in KiB.
func helperRSS(t *testing.T, in *irohNode) int {
	pid := irohHelperPID(t, in.n.opts.Home.Path(IrohDir))
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return kb
		}
	}
	return 0
}
