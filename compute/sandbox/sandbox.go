// Package sandbox runs one compute-market job: a WASI preview 1 command
// module, metered by package fuel, on wazero, with its input on stdin and
// its output taken from stdout, and reports an outcome that is the same on
// every engine and CPU (spec/compute-sandbox.md).
//
// A run is bounded five ways, each a distinct outcome: fuel (the metering
// pass traps when it runs out), call depth (the pass's frame counter),
// memory (the pass traps memory.grow past Limits.MemoryPages, and the
// runtime is capped at MaxMemoryPages besides), output (stdout past
// Limits.OutputBytes stops the run at that write), and a wall-clock
// deadline. The first four are exact and engine independent; the deadline
// is the one wall-clock bound, a guard against a slow host rather than part
// of a result. On the compiler a watchdog stops a run at its deadline by
// setting the fuel global to zero (every millisecond until the run
// returns, since the program's own store may overwrite one); the next
// charge, at the latest the next function entry or loop header, traps.
// wazero's close-on-context-done would do the same at a cost of a call per
// loop iteration (measured in docs/benchmarks/compute.md). The interpreter
// keeps wazero's check, which is cheap there, because its globals are Go
// values a second goroutine may not write; the metering pass opens an empty
// loop at every function entry so that the check stops loop-free recursion
// too. Running out of fuel, memory,
// stack or time is Inconclusive: the job was too big for the limits, never
// a wrong answer.
//
// The module sees no clock, randomness or filesystem beyond fixed values:
// wall time is a constant, monotonic time advances 1 ms per read, sleeps
// return at once, random_get reads a fixed ChaCha8 stream, there are no
// arguments, environment or preopened directories, and imports are limited
// to the WASI preview 1 functions in [AllowedImports].
//
// Not for: choosing executors, verifying results or moving jobs between
// nodes (packages compute and compute/verify do that).
package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"fleetmesh.org/fleetmesh/compute/fuel"
)

// Engine selects wazero's engine.
type Engine int

const (
	// Compiler is wazero's optimizing compiler (amd64 and arm64).
	Compiler Engine = iota
	// Interpreter is wazero's interpreter, portable and slower.
	Interpreter
)

// String names the engine.
func (e Engine) String() string {
	if e == Interpreter {
		return "interpreter"
	}
	return "compiler"
}

// Bounds every Limits value is clamped to, listed in spec/limits.md.
const (
	// MaxCallDepth stays below the interpreter's own 2000-frame ceiling,
	// leaving room for host-function frames.
	MaxCallDepth = 1900
	// MaxMemoryPages is the runtime's hard memory cap (4 GiB of 64 KiB pages).
	MaxMemoryPages = 65536
	// MaxCompiledModules bounds the compiled-module cache of a Runner.
	MaxCompiledModules = 64
)

// Limits bounds one run. Zero values take the defaults in DefaultLimits.
type Limits struct {
	Fuel        uint64        // instructions (see package fuel for costs)
	MemoryPages uint32        // 64 KiB pages the module's memory may reach
	OutputBytes int           // bytes of stdout
	CallDepth   uint32        // nested wasm calls
	Deadline    time.Duration // wall-clock guard; 0 means DefaultLimits'
}

// DefaultLimits are the limits a zero field takes.
var DefaultLimits = Limits{
	Fuel:        1_000_000_000,
	MemoryPages: 1024, // 64 MiB
	OutputBytes: 1 << 20,
	CallDepth:   1000,
	Deadline:    10 * time.Second,
}

func (l Limits) withDefaults() Limits {
	if l.Fuel == 0 {
		l.Fuel = DefaultLimits.Fuel
	}
	if l.Fuel > math.MaxInt64 {
		l.Fuel = math.MaxInt64
	}
	if l.MemoryPages == 0 {
		l.MemoryPages = DefaultLimits.MemoryPages
	}
	if l.MemoryPages > MaxMemoryPages {
		l.MemoryPages = MaxMemoryPages
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = DefaultLimits.OutputBytes
	}
	if l.CallDepth == 0 {
		l.CallDepth = DefaultLimits.CallDepth
	}
	if l.CallDepth > MaxCallDepth {
		l.CallDepth = MaxCallDepth
	}
	if l.Deadline <= 0 {
		l.Deadline = DefaultLimits.Deadline
	}
	return l
}

// Outcome is how a run ended.
type Outcome string

// Outcomes of a run.
const (
	OK             Outcome = "ok"               // exited 0 (or returned from _start)
	OutOfFuel      Outcome = "out_of_fuel"      // fuel ran out
	OutOfMemory    Outcome = "out_of_memory"    // memory past Limits.MemoryPages
	StackExhausted Outcome = "stack_exhausted"  // calls nested past Limits.CallDepth
	Deadline       Outcome = "deadline"         // the wall-clock guard fired
	OutputTooLarge Outcome = "output_too_large" // stdout past Limits.OutputBytes
	Trap           Outcome = "trap"             // the program trapped or exited non-zero
)

// Inconclusive reports whether the outcome says the limits were too small
// rather than anything about the answer: such a result is never "wrong".
func (o Outcome) Inconclusive() bool {
	switch o {
	case OutOfFuel, OutOfMemory, StackExhausted, Deadline:
		return true
	}
	return false
}

// Result is what a run produced.
type Result struct {
	Outcome Outcome
	Output  []byte   // stdout (empty unless OK or Trap)
	Hash    [32]byte // sha256 of Output, the canonical output bytes
	Fuel    uint64   // fuel used, equal on every engine; out of fuel, it can pass Limits.Fuel by the segments run since the last check
	Detail  string   // the exit code or trap message, for people
}

// AllowedImports are the functions a module may import, all from
// wasi_snapshot_preview1; with no preopens, sockets or arguments, each is
// deterministic.
var AllowedImports = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`args_get args_sizes_get environ_get environ_sizes_get
		clock_res_get clock_time_get fd_advise fd_allocate fd_close fd_datasync fd_fdstat_get
		fd_fdstat_set_flags fd_fdstat_set_rights fd_filestat_get fd_filestat_set_size
		fd_filestat_set_times fd_pread fd_prestat_get fd_prestat_dir_name fd_pwrite fd_read
		fd_readdir fd_renumber fd_seek fd_sync fd_tell fd_write path_create_directory
		path_filestat_get path_filestat_set_times path_link path_open path_readlink
		path_remove_directory path_rename path_symlink path_unlink_file poll_oneoff proc_exit
		random_get sched_yield`) {
		AllowedImports[n] = true
	}
}

// ErrRefused wraps every reason a module is not run.
var ErrRefused = errors.New("sandbox: module refused")

// Runner runs jobs on one wazero runtime and caches compiled modules by the
// sha256 of their bytes. It is safe for concurrent use.
type Runner struct {
	engine Engine
	rt     wazero.Runtime

	mu        sync.Mutex
	cacheSize int // MaxCompiledModules; tests lower it
	cache     map[[32]byte]*entry
	order     [][32]byte // insertion order, for eviction
}

type entry struct {
	compiled wazero.CompiledModule
	pages    uint32 // initial memory pages
	err      error
	ready    chan struct{}
	users    int
	evicted  bool
}

// New makes a Runner on engine e.
func New(ctx context.Context, e Engine) (*Runner, error) {
	return newRunner(ctx, e, e == Interpreter)
}

// newRunner makes a Runner; closeOnDone turns on wazero's own deadline
// check (benchmarks compare the compiler with and without it).
func newRunner(ctx context.Context, e Engine, closeOnDone bool) (*Runner, error) {
	var cfg wazero.RuntimeConfig
	switch e {
	case Compiler:
		cfg = wazero.NewRuntimeConfigCompiler()
	case Interpreter:
		cfg = wazero.NewRuntimeConfigInterpreter()
	default:
		return nil, fmt.Errorf("sandbox: unknown engine %d", e)
	}
	cfg = cfg.WithCoreFeatures(api.CoreFeaturesV2).
		WithMemoryLimitPages(MaxMemoryPages).
		WithCloseOnContextDone(closeOnDone)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("sandbox: WASI: %w", err)
	}
	return &Runner{engine: e, rt: rt, cacheSize: MaxCompiledModules, cache: map[[32]byte]*entry{}}, nil
}

// Close releases the runtime and every compiled module.
func (r *Runner) Close(ctx context.Context) error {
	return r.rt.Close(ctx)
}

// compile meters and compiles module once per distinct bytes.
func (r *Runner) compile(ctx context.Context, module []byte) (*entry, error) {
	key := sha256.Sum256(module)
	r.mu.Lock()
	e, ok := r.cache[key]
	if ok {
		e.users++
		r.mu.Unlock()
		<-e.ready
		return e, e.err
	}
	e = &entry{ready: make(chan struct{}), users: 1}
	r.cache[key] = e
	r.order = append(r.order, key)
	for len(r.order) > r.cacheSize {
		old := r.order[0]
		r.order = r.order[1:]
		oe := r.cache[old]
		delete(r.cache, old)
		oe.evicted = true
		if oe.users == 0 {
			r.closeEntry(ctx, oe)
		}
	}
	r.mu.Unlock()

	e.compiled, e.pages, e.err = r.meterAndCompile(ctx, module)
	close(e.ready)
	return e, e.err
}

// closeEntry closes a compiled module once it is ready.
func (r *Runner) closeEntry(ctx context.Context, e *entry) {
	go func() {
		<-e.ready
		if e.compiled != nil {
			_ = e.compiled.Close(ctx)
		}
	}()
}

func (r *Runner) release(ctx context.Context, e *entry) {
	r.mu.Lock()
	e.users--
	if e.users == 0 && e.evicted {
		r.closeEntry(ctx, e)
	}
	r.mu.Unlock()
}

func (r *Runner) meterAndCompile(ctx context.Context, module []byte) (wazero.CompiledModule, uint32, error) {
	metered, info, err := fuel.Meter(module)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	for _, im := range info.Imports {
		if im.Module != wasi_snapshot_preview1.ModuleName || im.Kind != 0 || !AllowedImports[im.Name] {
			return nil, 0, fmt.Errorf("%w: import %s.%s is not an allowed WASI preview 1 function", ErrRefused, im.Module, im.Name)
		}
	}
	cm, err := r.rt.CompileModule(ctx, metered)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: invalid module: %w", ErrRefused, err)
	}
	if _, ok := cm.ExportedFunctions()["_start"]; !ok {
		_ = cm.Close(ctx)
		return nil, 0, fmt.Errorf("%w: no _start export (not a WASI command module)", ErrRefused)
	}
	return cm, info.MemoryPages, nil
}

// errOutputTooLarge is panicked by the stdout writer; wazero turns a panic
// in a host call into an error from the call, so the run stops at the
// write that crossed the bound, on every engine.
var errOutputTooLarge = errors.New("output too large")

type boundedWriter struct {
	buf   bytes.Buffer
	limit int
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		panic(errOutputTooLarge)
	}
	return w.buf.Write(p)
}

// randSeed seeds the fixed random stream a module reads.
var randSeed = [32]byte{'f', 'l', 'e', 'e', 't', 'm', 'e', 's', 'h', ' ', 'c', 'o', 'm', 'p', 'u', 't', 'e'}

// moduleConfig is what a module sees: input on stdin, stdout to out, no
// stderr, arguments, environment or directories, and fixed clocks and
// randomness.
func moduleConfig(input []byte, out io.Writer) wazero.ModuleConfig {
	var ticks int64
	return wazero.NewModuleConfig().
		WithName("").
		WithStdin(bytes.NewReader(input)).
		WithStdout(out).
		WithStderr(io.Discard).
		WithWalltime(func() (int64, int32) { return 1_700_000_000, 0 }, sys.ClockResolution(1)).
		WithNanotime(func() int64 { ticks += int64(time.Millisecond); return ticks }, sys.ClockResolution(1)).
		WithNanosleep(func(int64) {}).
		WithRandSource(rand.NewChaCha8(randSeed))
}

// Run meters, compiles (once per distinct module) and runs module with
// input on stdin under lim. The error is non-nil only when the module is
// refused (wrapping ErrRefused, with the reason) or ctx ends; every way the
// program itself ends is a Result.
func (r *Runner) Run(ctx context.Context, module, input []byte, lim Limits) (Result, error) {
	lim = lim.withDefaults()
	e, err := r.compile(ctx, module)
	if err != nil {
		return Result{}, err
	}
	defer r.release(ctx, e)

	out := &boundedWriter{limit: lim.OutputBytes}
	cfg := moduleConfig(input, out).WithStartFunctions()

	if e.pages > lim.MemoryPages {
		return finish(Result{Outcome: OutOfMemory, Detail: fmt.Sprintf("initial memory of %d pages exceeds the limit of %d", e.pages, lim.MemoryPages)}), nil
	}
	runCtx, cancel := context.WithTimeout(ctx, lim.Deadline)
	defer cancel()
	mod, err := r.rt.InstantiateModule(runCtx, e.compiled, cfg)
	if err != nil {
		// Data or element segments out of bounds trap at instantiation.
		return finish(Result{Outcome: Trap, Detail: err.Error()}), nil
	}
	defer mod.Close(ctx)
	fuelG := mod.ExportedGlobal(fuel.ExportFuel).(api.MutableGlobal)
	depthG := mod.ExportedGlobal(fuel.ExportDepth).(api.MutableGlobal)
	pagesG := mod.ExportedGlobal(fuel.ExportMaxPages).(api.MutableGlobal)
	reasonG := mod.ExportedGlobal(fuel.ExportReason)
	fuelG.Set(lim.Fuel)
	depthG.Set(uint64(lim.CallDepth))
	pagesG.Set(uint64(lim.MemoryPages))

	stopped := func() (bool, uint64) { return false, 0 }
	if r.engine == Compiler {
		stopped = watchdog(runCtx, fuelG)
	}
	_, callErr := mod.ExportedFunction("_start").Call(runCtx)
	fired, left := stopped()
	if !fired {
		left = fuelG.Get()
	}
	res := Result{Fuel: lim.Fuel - left}
	var exit *sys.ExitError
	switch {
	case fired || (errors.As(callErr, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled)):
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("sandbox: run cancelled: %w", ctx.Err())
		}
		res.Outcome = Deadline
		res.Detail = fmt.Sprintf("stopped after %s", lim.Deadline)
	case callErr == nil:
		res.Outcome = OK
	case errors.As(callErr, &exit):
		if exit.ExitCode() == 0 {
			res.Outcome = OK
		} else {
			res.Outcome = Trap
			res.Detail = fmt.Sprintf("exit code %d", exit.ExitCode())
		}
	case errors.Is(callErr, errOutputTooLarge):
		res.Outcome = OutputTooLarge
		res.Detail = fmt.Sprintf("output exceeds %d bytes", lim.OutputBytes)
	default:
		switch reasonG.Get() {
		case fuel.ReasonFuel:
			res.Outcome = OutOfFuel
		case fuel.ReasonDepth:
			res.Outcome = StackExhausted
		case fuel.ReasonMemory:
			res.Outcome = OutOfMemory
		default:
			res.Outcome = Trap
			res.Detail = firstLine(callErr.Error())
		}
	}
	if res.Outcome == OK || res.Outcome == Trap {
		res.Output = out.buf.Bytes()
	}
	return finish(res), nil
}

// watchdog stops a compiled run when ctx ends by zeroing its fuel global
// until the run returns. The returned func, called after the run, waits for
// the watchdog and reports whether it fired and how much fuel was left when
// it did.
func watchdog(ctx context.Context, fuelG api.MutableGlobal) func() (bool, uint64) {
	done := make(chan struct{})
	finished := make(chan struct{})
	var fired bool
	var left uint64
	go func() {
		defer close(finished)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		fired, left = true, fuelG.Get()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			fuelG.Set(0)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (bool, uint64) {
		close(done)
		<-finished
		return fired, left
	}
}

func finish(r Result) Result {
	r.Hash = sha256.Sum256(r.Output)
	return r
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
