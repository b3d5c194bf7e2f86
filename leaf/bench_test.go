package leaf

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/netem"
	"fleetmesh.org/fleetmesh/relay"
)

// impaired is the benchmark's path: 150 ms RTT, 1 % loss.
var impaired = netem.Config{Latency: 75 * time.Millisecond, Loss: 0.01}

// leanWakeMain is a program that links only package leaf and runs one
// wake, as an app (or an iOS notification service extension) would: its
// memory is the leaf's, not the test binary's (which links every package
// of the tests and starts at ~22 MB resident).
const leanWakeMain = `package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"fleetmesh.org/fleetmesh/leaf"
)

func main() {
	dir := os.Args[1]
	l, err := leaf.New(leaf.NewConfig(dir), leaf.NewFileKeyStore(dir+"/leaf.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := l.Sync(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	l.Close()
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	hwm := int64(-1)
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	out, _ := json.Marshal(map[string]any{"summary": s, "cpu_ms": time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Milliseconds(), "maxrss_kb": hwm})
	fmt.Println(string(out))
}
`

// buildLeanWake builds leanWakeMain in a scratch module that requires
// this one by replace (with this module's go.sum, so nothing is fetched).
func buildLeanWake(b *testing.B) string {
	b.Helper()
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		b.Fatal(err)
	}
	mod := filepath.Dir(strings.TrimSpace(string(root)))
	dir := b.TempDir()
	sum, err := os.ReadFile(filepath.Join(mod, "go.sum"))
	if err != nil {
		b.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(mod, "go.mod"))
	if err != nil {
		b.Fatal(err)
	}
	// The scratch module takes this one's requirements as they are.
	reqs := string(gomod)[strings.Index(string(gomod), "require"):]
	files := map[string]string{
		"go.mod":  "module leanwake\n\ngo 1.26\n\nrequire fleetmesh.org/fleetmesh v0.0.0\n\nreplace fleetmesh.org/fleetmesh => " + mod + "\n\n" + reqs,
		"go.sum":  string(sum),
		"main.go": leanWakeMain,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "leanwake")
	cmd := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the lean wake program: %v\n%s", err, out)
	}
	return bin
}

// runChildWake runs one wake of the leaf in dir in its own process (the
// lean program), so its CPU time and peak memory are the leaf's alone.
func runChildWake(b *testing.B, bin, dir string) childResult {
	b.Helper()
	cmd := exec.Command(bin, dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("child wake: %v", err)
	}
	var r childResult
	if err := json.Unmarshal(out, &r); err != nil || r.Summary == nil {
		b.Fatalf("child wake printed %q: %v", out, err)
	}
	return r
}

// childResult is what the lean program prints.
type childResult struct {
	Summary  *Summary `json:"summary"`
	CPUms    int64    `json:"cpu_ms"`
	MaxRSSKB int64    `json:"maxrss_kb"`
}

// report adds one wake's figures to the benchmark's metrics (averaged
// over b.N by the caller's division).
type wakeTotals struct {
	sent, recv, rtts, conns, first, cpu, rss, dur float64
	n                                             int
}

func (w *wakeTotals) add(r childResult) {
	s := r.Summary
	w.sent += float64(s.BytesSent)
	w.recv += float64(s.BytesReceived)
	w.rtts += float64(s.RoundTrips)
	w.conns += float64(s.Connections)
	w.first += float64(s.FirstPickupMs)
	w.cpu += float64(r.CPUms)
	w.rss = max(w.rss, float64(r.MaxRSSKB))
	w.dur += float64(s.DurationMs)
	w.n++
}

func (w *wakeTotals) report(b *testing.B) {
	n := float64(w.n)
	b.ReportMetric(w.sent/n, "B-sent/wake")
	b.ReportMetric(w.recv/n, "B-recv/wake")
	b.ReportMetric(w.rtts/n, "round-trips/wake")
	b.ReportMetric(w.conns/n, "conns/wake")
	b.ReportMetric(w.first/n, "first-pickup-ms")
	b.ReportMetric(w.cpu/n, "cpu-ms/wake")
	b.ReportMetric(w.rss/1024, "peak-RSS-MB")
	b.ReportMetric(w.dur/n, "wake-ms")
}

// BenchmarkWake measures one wake, in a process of its own, over 150 ms
// RTT and 1 % loss: empty (nothing queued, nothing new, 10,000 events in
// sync) and loaded (500 queued messages, 200 of 10,000 events missing),
// each caught up by NIP-77 and, against a home that refuses NIP-77 for
// the filter, by since REQs from the last catch-up (less the 10-minute
// overlap), in the same run; and a pickup-only wake (500 messages, no
// subscription) for peak memory. Run with
// `go test -run '^$' -bench BenchmarkWake -benchtime 3x ./leaf/`.
func BenchmarkWake(b *testing.B) {
	bin := buildLeanWake(b)
	noNeg := func(c *relay.Config) { c.MaxNegRecords = 1 }
	for _, sc := range []struct {
		name              string
		messages, missing int
		home              func(*relay.Config)
	}{
		{"empty/negentropy", 0, 0, nil},
		{"empty/since", 0, 0, noNeg},
		{"loaded/negentropy", 500, 200, nil},
		{"loaded/since", 500, 200, noNeg},
	} {
		b.Run(sc.name, func(b *testing.B) {
			var tot wakeTotals
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				w := setupLoaded(b, sc.messages, 10_000, sc.missing, impaired, sc.home)
				held := w.events[len(w.events)-sc.missing-1].CreatedAt
				// A since client remembers when it last caught up: the
				// newest event it holds.
				if err := w.leaf.db.updateState(func(s *state) error {
					s.Subs[0].Covered, s.Subs[0].Pending = held, nil
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				w.leaf.Close()
				b.StartTimer()
				r := runChildWake(b, bin, w.dir)
				b.StopTimer()
				if !r.Summary.CaughtUp || r.Summary.PickedUp != int64(sc.messages) || r.Summary.EventsFetched != int64(sc.missing) {
					b.Fatalf("wake: %s", r.Summary.JSON())
				}
				b.Logf("%s", r.Summary.JSON())
				tot.add(r)
				w.proxy.Close()
				w.home.stop()
			}
			tot.report(b)
		})
	}
	b.Run("pickup-only", func(b *testing.B) {
		var tot wakeTotals
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			h, p, l := pairedLeaf(b, nil)
			h.queue(b, newSender(b), l.DID(), 500)
			p.SetConfig(impaired)
			dir := l.cfg.Dir
			l.Close()
			b.StartTimer()
			r := runChildWake(b, bin, dir)
			b.StopTimer()
			if r.Summary.PickedUp != 500 || !r.Summary.CaughtUp {
				b.Fatalf("wake: %s", r.Summary.JSON())
			}
			tot.add(r)
			p.Close()
			h.stop()
		}
		tot.report(b)
	})
}
