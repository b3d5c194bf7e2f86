package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"golang.org/x/sys/unix"

	"fleetmesh.org/fleetmesh/compute/fuel"
)

// The benchmark jobs are small Go programs under testdata/bench, built for
// GOOS=wasip1 GOARCH=wasm when a benchmark first needs them.
var (
	jobsOnce  sync.Once
	jobsDir   string
	jobsBuilt = map[string][]byte{}
	jobsErr   error
)

func benchJob(b *testing.B, name string) []byte {
	b.Helper()
	jobsOnce.Do(func() {
		jobsDir, jobsErr = os.MkdirTemp("", "sandbox-bench")
		if jobsErr != nil {
			return
		}
		for _, n := range []string{"sha256", "jsonparse", "matmul"} {
			out := filepath.Join(jobsDir, n+".wasm")
			cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
			cmd.Dir = filepath.Join("testdata", "bench", n)
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if msg, err := cmd.CombinedOutput(); err != nil {
				jobsErr = fmt.Errorf("build %s: %v\n%s", n, err, msg)
				return
			}
			if jobsBuilt[n], jobsErr = os.ReadFile(out); jobsErr != nil {
				return
			}
		}
		_ = os.RemoveAll(jobsDir)
	})
	if jobsErr != nil {
		b.Fatal(jobsErr)
	}
	return jobsBuilt[name]
}

// benchInput is each job's stdin: 32 KiB to hash 64 times, a 100 KB JSON
// document, and the size of the matrices.
func benchInput(name string) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	switch name {
	case "sha256":
		b := make([]byte, 32<<10)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	case "jsonparse":
		var items []any
		for i := 0; len(items) < 700; i++ {
			items = append(items, map[string]any{
				"id": i, "name": fmt.Sprintf("item-%d", rng.Uint32()), "score": rng.Float64(),
				"tags": []any{"a", "b", rng.IntN(100)}, "ok": i%3 == 0,
				"child": map[string]any{"x": rng.IntN(1000), "y": []any{1.5, 2.5, nil}},
			})
		}
		b, _ := json.Marshal(map[string]any{"items": items})
		return b
	}
	return []byte("160\n")
}

// unmetered runs a module as it is on wazero's compiler, with the same WASI
// set-up as the sandbox: the peer the metering overhead is measured against.
type unmetered struct {
	rt wazero.Runtime
	cm wazero.CompiledModule
}

func newUnmetered(b *testing.B, module []byte) *unmetered {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithMemoryLimitPages(MaxMemoryPages))
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	cm, err := rt.CompileModule(ctx, module)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close(ctx) })
	return &unmetered{rt: rt, cm: cm}
}

func (u *unmetered) run(b *testing.B, input []byte) []byte {
	var out bytes.Buffer
	mod, err := u.rt.InstantiateModule(context.Background(), u.cm, moduleConfig(input, &out))
	if err != nil {
		b.Fatal(err)
	}
	_ = mod.Close(context.Background())
	return out.Bytes()
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var benchLimits = Limits{Fuel: 1 << 40, MemoryPages: 4096, OutputBytes: 1 << 20, CallDepth: 1000, Deadline: time.Minute}

// BenchmarkMeteringOverhead runs each job unmetered and metered on the
// compiler, alternately in the same loop, and reports both times and the
// overhead of metering in percent, in CPU time of the thread that ran the
// job (the machine may be busy with other work). Run:
//
//	go test -run '^$' -bench MeteringOverhead -benchtime 10x ./compute/sandbox/
func BenchmarkMeteringOverhead(b *testing.B) {
	for _, name := range []string{"sha256", "jsonparse", "matmul"} {
		b.Run(name, func(b *testing.B) {
			module, input := benchJob(b, name), benchInput(name)
			u := newUnmetered(b, module)
			r, err := New(context.Background(), Compiler)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close(context.Background())
			want := u.run(b, input)
			res, err := r.Run(context.Background(), module, input, benchLimits)
			if err != nil || res.Outcome != OK || !bytes.Equal(res.Output, want) {
				b.Fatalf("metered run: %v %s %s: %q, unmetered %q", err, res.Outcome, res.Detail, res.Output, want)
			}
			// Wasm runs on the calling goroutine: pinned to its thread, the
			// thread's CPU time is the job's, whatever else the machine runs.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var plain, metered time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := threadCPU(b)
				u.run(b, input)
				t1 := threadCPU(b)
				if _, err := r.Run(context.Background(), module, input, benchLimits); err != nil {
					b.Fatal(err)
				}
				t2 := threadCPU(b)
				plain += t1 - t0
				metered += t2 - t1
			}
			b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "cpu-ns-unmetered/job")
			b.ReportMetric(float64(metered.Nanoseconds())/float64(b.N), "cpu-ns-metered/job")
			b.ReportMetric(100*(float64(metered)/float64(plain)-1), "%overhead")
			b.ReportMetric(float64(res.Fuel), "fuel/job")
		})
	}
}

// BenchmarkSetup measures what a job costs before it runs: the metering
// pass and compiling the module metered against compiling it as it is
// (the Runner does both once per module and caches the result), and a
// job's own instantiation once its module is cached.
//
//	go test -run '^$' -bench Setup -benchtime 2x ./compute/sandbox/
func BenchmarkSetup(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"sha256", "jsonparse", "matmul"} {
		module := benchJob(b, name)
		metered, _, err := fuel.Meter(module)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/meter", func(b *testing.B) {
			b.SetBytes(int64(len(module)))
			for i := 0; i < b.N; i++ {
				if _, _, err := fuel.Meter(module); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(100*(float64(len(metered))/float64(len(module))-1), "%size")
		})
		b.Run(name+"/instantiate", func(b *testing.B) {
			// A job's own set-up once its module is compiled: instantiate,
			// set the limits, stop at the first fuel check.
			r, err := New(ctx, Compiler)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close(ctx)
			if _, err := r.Run(ctx, module, nil, Limits{Fuel: 1}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := r.Run(ctx, module, nil, Limits{Fuel: 1})
				if err != nil || res.Outcome != OutOfFuel {
					b.Fatal(err, res.Outcome)
				}
			}
		})
		for _, tc := range []struct {
			label string
			bytes []byte
		}{{"compile-unmetered", module}, {"compile-metered", metered}} {
			b.Run(name+"/"+tc.label, func(b *testing.B) {
				rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
				defer rt.Close(ctx)
				for i := 0; i < b.N; i++ {
					cm, err := rt.CompileModule(ctx, tc.bytes)
					if err != nil {
						b.Fatal(err)
					}
					_ = cm.Close(ctx)
				}
			})
		}
	}
}

// BenchmarkConcurrentJobMemory runs 8 jsonparse jobs at a time on one
// Runner and reports the peak Go heap above the idle heap, per job (wazero
// keeps linear memory on the Go heap).
//
//	go test -run '^$' -bench ConcurrentJobMemory -benchtime 5x ./compute/sandbox/
func BenchmarkConcurrentJobMemory(b *testing.B) {
	const concurrent = 8
	ctx := context.Background()
	module, input := benchJob(b, "jsonparse"), benchInput("jsonparse")
	r, err := New(ctx, Compiler)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	if _, err := r.Run(ctx, module, input, benchLimits); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	idle := ms.HeapInuse
	var peak uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for j := 0; j < concurrent; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if res, err := r.Run(ctx, module, input, benchLimits); err != nil || res.Outcome != OK {
					b.Error(err, res.Outcome)
				}
			}()
		}
		wg.Wait()
	}
	close(stop)
	<-sampled
	b.ReportMetric(float64(peak-idle)/concurrent, "heap-B/job")
}

// BenchmarkStopAtLimit runs each hostile module with limits it reaches at
// once (its first fuel check, first call, first grow, first write), so a
// run's time is set-up plus the stop: an upper bound on how long a run
// takes to stop after reaching any limit, which the metering checks make
// synchronous (the trap is the next instruction).
//
//	go test -run '^$' -bench StopAtLimit ./compute/sandbox/
func BenchmarkStopAtLimit(b *testing.B) {
	ctx := context.Background()
	comp, interp := runners(b)
	for _, tc := range []struct {
		name string
		lim  Limits
		want Outcome
	}{
		{"infinite_loop", Limits{Fuel: 1}, OutOfFuel},
		{"exp_recursion", Limits{Fuel: 1}, OutOfFuel},
		{"memory_grow_bomb", Limits{MemoryPages: 1}, OutOfMemory},
		{"deep_recursion", Limits{CallDepth: 1}, StackExhausted},
		{"huge_output", Limits{OutputBytes: 1}, OutputTooLarge},
	} {
		mod := wat(b, tc.name)
		for _, r := range []*Runner{comp, interp} {
			b.Run(tc.name+"/"+r.engine.String(), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					res, err := r.Run(ctx, mod, nil, tc.lim)
					if err != nil || res.Outcome != tc.want {
						b.Fatalf("%v %s, want %s", err, res.Outcome, tc.want)
					}
				}
			})
		}
	}
}

// BenchmarkDeadlineCheck runs the metered infinite loop for 1,000,000 fuel
// on the compiler with the fuel watchdog alone (what the sandbox uses) and
// with wazero's close-on-context-done check at loop headers as well.
//
//	go test -run '^$' -bench DeadlineCheck ./compute/sandbox/
func BenchmarkDeadlineCheck(b *testing.B) {
	ctx := context.Background()
	mod := wat(b, "infinite_loop")
	for _, closeOnDone := range []bool{false, true} {
		name := "fuel-watchdog"
		if closeOnDone {
			name = "close-on-context-done"
		}
		b.Run(name, func(b *testing.B) {
			r, err := newRunner(ctx, Compiler, closeOnDone)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close(ctx)
			for i := 0; i < b.N; i++ {
				if res, err := r.Run(ctx, mod, nil, Limits{Fuel: 1_000_000}); err != nil || res.Outcome != OutOfFuel {
					b.Fatal(err, res.Outcome)
				}
			}
		})
	}
}
