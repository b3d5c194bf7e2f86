package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// wat builds testdata/name.wat with wat2wasm (Debian's wabt, which
// scripts/test.sh installs).
func wat(t testing.TB, name string) []byte {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Skip("wat2wasm not installed (apt-get install wabt; scripts/test.sh installs it)")
	}
	out := filepath.Join(t.TempDir(), name+".wasm")
	cmd := exec.Command("wat2wasm", filepath.Join("testdata", name+".wat"), "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", name, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runners makes a compiler and an interpreter Runner, closed at cleanup.
func runners(t testing.TB) (*Runner, *Runner) {
	t.Helper()
	ctx := context.Background()
	c, err := New(ctx, Compiler)
	if err != nil {
		t.Fatal(err)
	}
	i, err := New(ctx, Interpreter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close(ctx)
		_ = i.Close(ctx)
	})
	return c, i
}

// hostileLimits are small limits so hostile modules reach them quickly; the
// deadline is far beyond them so that a stop by any other bound shows the
// bound, not the clock, stopped the run.
var hostileLimits = Limits{
	Fuel:        300_000,
	MemoryPages: 64,
	OutputBytes: 1 << 20,
	CallDepth:   500,
	Deadline:    20 * time.Second,
}

func TestHostileModulesAgreeAcrossEngines(t *testing.T) {
	comp, interp := runners(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		input string
		want  Outcome
	}{
		{"echo", "hello, sandbox", OK},
		{"infinite_loop", "", OutOfFuel},
		{"exp_recursion", "", OutOfFuel},
		{"memory_grow_bomb", "", OutOfMemory},
		{"deep_recursion", "", StackExhausted},
		{"nan_floats", "", OK},
		{"huge_output", "", OutputTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := wat(t, tc.name)
			var results [2]Result
			for i, r := range []*Runner{comp, interp} {
				start := time.Now()
				res, err := r.Run(ctx, mod, []byte(tc.input), hostileLimits)
				if err != nil {
					t.Fatalf("%s: %v", r.engine, err)
				}
				t.Logf("%s: %s fuel=%d in %v %s", r.engine, res.Outcome, res.Fuel, time.Since(start), res.Detail)
				if res.Outcome != tc.want {
					t.Fatalf("%s: outcome %s (%s), want %s", r.engine, res.Outcome, res.Detail, tc.want)
				}
				results[i] = res
			}
			c, in := results[0], results[1]
			if c.Hash != in.Hash || c.Fuel != in.Fuel || !bytes.Equal(c.Output, in.Output) {
				t.Fatalf("engines differ: compiler %x fuel %d, interpreter %x fuel %d", c.Hash[:8], c.Fuel, in.Hash[:8], in.Fuel)
			}
			if tc.name == "echo" && string(c.Output) != tc.input {
				t.Fatalf("echo output %q", c.Output)
			}
		})
	}
}

// TestMaxCallDepthIsBelowEngineLimits recurses to MaxCallDepth on both
// engines: the metering counter, not wazero's own stack limit (2000
// frames on the interpreter), must stop it.
func TestMaxCallDepthIsBelowEngineLimits(t *testing.T) {
	comp, interp := runners(t)
	mod := wat(t, "deep_recursion")
	var fuels []uint64
	for _, r := range []*Runner{comp, interp} {
		res, err := r.Run(context.Background(), mod, nil, Limits{CallDepth: MaxCallDepth + 100})
		if err != nil || res.Outcome != StackExhausted {
			t.Fatalf("%s: %v %s %s", r.engine, err, res.Outcome, res.Detail)
		}
		fuels = append(fuels, res.Fuel)
	}
	if fuels[0] != fuels[1] {
		t.Fatalf("fuel differs: %v", fuels)
	}
}

func TestNaNsAreCanonical(t *testing.T) {
	comp, _ := runners(t)
	res, err := comp.Run(context.Background(), wat(t, "nan_floats"), nil, Limits{})
	if err != nil || res.Outcome != OK {
		t.Fatalf("%v %s %s", err, res.Outcome, res.Detail)
	}
	if len(res.Output) != 88 {
		t.Fatalf("output %d bytes", len(res.Output))
	}
	// Every float written is a NaN; each must have the canonical bits.
	o := res.Output
	for _, off := range []int{0, 8, 16, 24, 32, 40, 48, 60, 72, 80} {
		if !bytes.Equal(o[off:off+8], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}) {
			t.Errorf("f64 at %d: % x, want the canonical NaN", off, o[off:off+8])
		}
	}
	for _, off := range []int{56, 68} {
		if !bytes.Equal(o[off:off+4], []byte{0, 0, 0xc0, 0x7f}) {
			t.Errorf("f32 at %d: % x, want the canonical NaN", off, o[off:off+4])
		}
	}
}

func TestRefusesModules(t *testing.T) {
	comp, _ := runners(t)
	for _, tc := range []struct {
		name, wat, reason string
	}{
		{"foreign import", `(module (import "env" "now" (func)) (func (export "_start")))`, "env.now"},
		{"no _start", `(module (func (export "main")))`, "_start"},
		{"start section", `(module (func $s) (start $s) (func (export "_start")))`, "start section"},
		{"shared memory", `(module (memory 1 1 shared) (func (export "_start")))`, "threads"},
		{"simd", `(module (func (export "_start") (drop (v128.const i64x2 0 0))))`, "SIMD"},
		{"reserved export", `(module (global (export "fleetmesh_fuel") i32 (i32.const 0)) (func (export "_start")))`, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := watString(t, tc.wat)
			_, err := comp.Run(context.Background(), mod, nil, Limits{})
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err = %v, want refused naming %q", err, tc.reason)
			}
		})
	}
}

// watString builds a module from WAT text.
func watString(t testing.TB, src string) []byte {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Skip("wat2wasm not installed (apt-get install wabt; scripts/test.sh installs it)")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("wat2wasm", "--enable-all", in, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeadlineStopsEverything runs hostile modules with fuel that would
// last hours and a short deadline: each run must end with Deadline. The
// delay from the deadline to the stop is logged (see
// docs/benchmarks/compute.md); the test only waits for the stop within a
// generous bound instead of asserting a time.
func TestDeadlineStopsEverything(t *testing.T) {
	comp, interp := runners(t)
	const deadline = 100 * time.Millisecond
	for _, name := range []string{"infinite_loop", "exp_recursion"} {
		mod := wat(t, name)
		for _, r := range []*Runner{comp, interp} {
			type ran struct {
				res Result
				err error
				at  time.Time
			}
			done := make(chan ran, 1)
			start := time.Now()
			go func() {
				res, err := r.Run(context.Background(), mod, nil, Limits{Fuel: 1 << 62, Deadline: deadline})
				done <- ran{res, err, time.Now()}
			}()
			select {
			case got := <-done:
				if got.err != nil || got.res.Outcome != Deadline {
					t.Fatalf("%s on %s: %v %s", name, r.engine, got.err, got.res.Outcome)
				}
				t.Logf("%s on %s: stopped %v after the deadline", name, r.engine, got.at.Sub(start)-deadline)
			case <-time.After(30 * time.Second):
				t.Fatalf("%s on %s: not stopped 30 s after a %v deadline", name, r.engine, deadline)
			}
		}
	}
}

// TestConcurrentRuns shares one Runner per engine between goroutines that
// run different modules (so the compile cache fills and evicts under
// concurrency); every result must match the one run alone.
func TestConcurrentRuns(t *testing.T) {
	comp, interp := runners(t)
	ctx := context.Background()
	mods := [][]byte{wat(t, "echo"), wat(t, "nan_floats"), wat(t, "deep_recursion")}
	for seed := uint64(0); seed < 6; seed++ {
		mods = append(mods, generateModule(5000+seed))
	}
	for _, r := range []*Runner{comp, interp} {
		r.cacheSize = 4
		want := make([]Result, len(mods))
		for i, m := range mods {
			res, err := r.Run(ctx, m, []byte("in"), corpusLimits)
			if err != nil {
				t.Fatal(err)
			}
			want[i] = res
		}
		errs := make(chan error, 4)
		for g := 0; g < 4; g++ {
			go func() {
				for i := range mods {
					j := (i + g*17) % len(mods)
					res, err := r.Run(ctx, mods[j], []byte("in"), corpusLimits)
					if err == nil && (res.Outcome != want[j].Outcome || res.Hash != want[j].Hash || res.Fuel != want[j].Fuel) {
						err = errors.New(r.engine.String() + ": a concurrent run differs from the run alone")
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for g := 0; g < 4; g++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}
