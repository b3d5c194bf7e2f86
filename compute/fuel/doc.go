// Package fuel is the metering pass of the compute market: a pure function
// from WebAssembly module bytes to module bytes that makes a module's
// execution bounded and the same on every engine (spec/compute-sandbox.md).
//
// What the pass adds, all inside the module so that wazero's compiler and
// interpreter execute exactly the same checks:
//
//   - Fuel. A mutable i64 global (exported as [ExportFuel]) is charged at
//     the start of every straight-line segment of code with the number of
//     instructions in that segment: at function entry, at each loop header,
//     at both arms of an if, after a br_if/br_table/br/return, and after the
//     end of an if or of a block that some branch targets. A charge that
//     would take the global below zero traps before the segment runs, so a
//     run stops at the same instruction with the same fuel left on every
//     engine. Bulk operations (memory.fill, memory.copy, memory.init,
//     table.*) and memory.grow are charged in proportion to their length.
//   - Call depth. A mutable i32 global ([ExportDepth]) holds the frames left;
//     every function decrements it at entry (trapping at zero) and increments
//     it on every way out. Wasm's own stack limits differ between engines
//     (the interpreter stops at 2000 frames, the compiler at 400 MB of
//     stack); this counter stops both at the same call, below either limit.
//   - Memory. memory.grow is checked against a mutable i64 global
//     ([ExportMaxPages]) and traps instead of growing past it, so running out
//     of memory is a distinct outcome rather than a -1 the program may or may
//     not notice. table.grow is checked against [MaxTableElements].
//   - NaNs. Whether a float is a NaN is the same on every engine, but the
//     sign and payload bits of a NaN that arithmetic produces are the
//     engine's (and CPU's) choice. Those bits become observable only where
//     a float is stored to memory, reinterpreted as an integer, or gives its
//     sign to copysign (floats reach no host function and no export), so
//     the pass replaces a NaN by the canonical quiet NaN at exactly those
//     points. Canonicalising after every arithmetic instruction instead
//     would cost about twice as much in float-heavy loops.
//   - A reason. Each trap the pass adds first stores why in an i32 global
//     ([ExportReason]), so the runner can tell a metering stop from the
//     program's own trap.
//
// The pass refuses what it cannot make deterministic or bounded: SIMD,
// threads (atomics and shared memories), exceptions, tail calls, typed
// function references and GC, multiple memories, 64-bit memories, a start
// section (the host must set the globals before any code runs; a WASI
// command starts at _start), and functions with more than [MaxLocals]
// params and locals.
//
// Why the opcode walk and the section framing are hand-written: the walk has
// to know every instruction's immediates and its control-flow effect, which
// no decoder library gives as a rewriting API. The one binary codec served
// by the module proxy, github.com/tetratelabs/wabin, leaves function bodies
// as bytes (so it would save only the section framing), has had no release
// since 2023, and expands declared locals eagerly: five bytes declaring
// 2^32-1 locals make it allocate gigabytes, which a pass fed untrusted
// modules cannot afford. The pass checks every vector count against the
// bytes left before anything allocates for it (wazero's decoder does not),
// copies the sections it does not change byte for byte, and drops custom
// sections (names are not needed to run). wazero validates the result.
//
// Not for: validating modules in full (wazero does that), deciding which
// imports are allowed (package sandbox does), or running anything.
package fuel
