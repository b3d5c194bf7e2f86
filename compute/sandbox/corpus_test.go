package sandbox

import (
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"testing"
)

var corpusSize = flag.Int("corpus.n", 0, "generated modules in TestGeneratedCorpusAgreesAcrossEngines (default 1000, 250 under -race; try 20000)")

// corpusN is the corpus size: the flag, else 1000 modules, or 250 under the
// race detector (which slows compiling and interpreting about tenfold, so
// that the suite's race run stays under half a minute here).
func corpusN() int {
	switch {
	case *corpusSize > 0:
		return *corpusSize
	case raceEnabled:
		return 250
	}
	return 1000
}

// gen writes random but valid WASI command modules: a few functions of type
// (i64) -> i64 that mix integer and float arithmetic (NaN bits exposed by
// reinterpretation), memory loads, stores and growth, calls (recursion
// included), if/else, br_if, br_table, counted and endless loops and early
// returns; _start calls the first and writes 1 KiB of memory to stdout.
type gen struct {
	rng   *rand.Rand
	b     []byte
	k     int // the function being written
	funcs int
}

const (
	genLocalP   = 0 // the param
	genLocalCnt = 1 // loop counter
	genLocalAcc = 2 // accumulator
)

func (g *gen) op(b ...byte) { g.b = append(g.b, b...) }

func (g *gen) i64(v int64) {
	g.op(0x42)
	g.b = appendSLEB(g.b, v)
}

func (g *gen) i32(v int32) {
	g.op(0x41)
	g.b = appendSLEB(g.b, int64(v))
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// addr pushes an i32 address in [0, 1016], 8-aligned.
func (g *gen) addr(d int) {
	g.expr(d)
	g.op(0xa7) // i32.wrap_i64
	g.i32(0x3f8)
	g.op(0x71) // i32.and
}

// expr pushes one i64.
func (g *gen) expr(d int) {
	if d <= 0 {
		switch g.rng.IntN(3) {
		case 0:
			g.op(0x20, genLocalP)
		case 1:
			g.op(0x20, genLocalAcc)
		default:
			g.i64(g.rng.Int64N(1<<40) - 1<<39)
		}
		return
	}
	switch g.rng.IntN(14) {
	case 0, 1, 2: // integer binop
		g.expr(d - 1)
		g.expr(d - 1)
		ops := []byte{0x7c, 0x7d, 0x7e, 0x83, 0x84, 0x85, 0x86, 0x88, 0x87, 0x89, 0x80, 0x81}
		g.op(ops[g.rng.IntN(len(ops))]) // includes div_u and rem_s, which may trap
	case 3: // call, forward mostly, backward sometimes (recursion)
		g.expr(d - 1)
		j := g.k + 1 + g.rng.IntN(2)
		if g.rng.IntN(8) == 0 || j >= g.funcs {
			j = g.rng.IntN(g.k + 1)
		}
		g.op(0x10, byte(2+j))
	case 4: // if/else
		g.expr(d - 1)
		g.op(0x50, 0x04, 0x7e) // i64.eqz; if (result i64)
		g.expr(d - 1)
		g.op(0x05)
		g.expr(d - 1)
		g.op(0x0b)
	case 5: // f64 arithmetic, bits exposed
		g.expr(d - 1)
		g.op(0xb9) // f64.convert_i64_s
		g.expr(d - 1)
		g.op(0xb9)
		ops := []byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5}
		g.op(ops[g.rng.IntN(len(ops))])
		if g.rng.IntN(2) == 0 {
			g.op(0x9f) // sqrt
		}
		if g.rng.IntN(3) == 0 {
			g.op(0xfc, 6) // i64.trunc_sat_f64_s
		} else {
			g.op(0xbd) // i64.reinterpret_f64
		}
	case 6: // f32 arithmetic from 0/0-prone operands, bits exposed
		g.expr(d - 1)
		g.op(0xb4) // f32.convert_i64_s
		g.expr(d - 1)
		g.op(0xb4)
		ops := []byte{0x92, 0x93, 0x94, 0x95, 0x96, 0x97}
		g.op(ops[g.rng.IntN(len(ops))])
		g.op(0xbb)                               // f64.promote_f32
		g.op(0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f) // +inf
		g.op(0xa2, 0xbd)                         // f64.mul (0 * inf is NaN); i64.reinterpret_f64
	case 7: // load
		g.addr(d - 1)
		g.op(0x29, 3, 0) // i64.load align=8
	case 8: // memory.grow by 0..7 pages
		g.expr(d - 1)
		g.op(0xa7)
		g.i32(7)
		g.op(0x71, 0x40, 0, 0xac) // i32.and; memory.grow; i64.extend_i32_s
	case 9: // block with br_if carrying a value
		g.op(0x02, 0x7e)
		g.expr(d - 1)
		g.expr(d - 1)
		g.op(0xa7, 0x0d, 0, 0x1a) // i32.wrap; br_if 0; drop
		g.expr(d - 1)
		g.op(0x0b)
	case 10: // br_table over three void blocks, result through the accumulator
		g.op(0x02, 0x40, 0x02, 0x40, 0x02, 0x40)
		g.expr(d - 1)
		g.op(0xa7)
		g.i32(3)
		g.op(0x70)                   // i32.rem_u
		g.op(0x0e, 2, 0, 1, 2, 0x0b) // br_table 0 1 2; end
		g.expr(d - 1)
		g.op(0x21, genLocalAcc, 0x0b) // local.set acc; end
		g.expr(d - 1)
		g.op(0x21, genLocalAcc, 0x0b)
		g.op(0x20, genLocalAcc)
	case 11: // sign extension and a select
		g.expr(d - 1)
		g.op(0xc4) // i64.extend32_s
		g.expr(d - 1)
		g.expr(d - 1)
		g.op(0xa7, 0x1b) // i32.wrap; select
	default:
		g.expr(d - 1)
	}
}

// stmt leaves the stack as it found it.
func (g *gen) stmt(d int, inLoop bool) {
	switch g.rng.IntN(6) {
	case 0: // store
		g.addr(d)
		g.expr(d)
		g.op(0x37, 3, 0) // i64.store
	case 1: // accumulate
		g.expr(d)
		g.op(0x20, genLocalAcc, 0x7c, 0x21, genLocalAcc)
	case 2: // counted loop
		if inLoop {
			return
		}
		g.i64(0)
		g.op(0x21, genLocalCnt, 0x03, 0x40)
		g.stmt(d, true)
		g.stmt(d, true)
		g.op(0x20, genLocalCnt)
		g.i64(1)
		g.op(0x7c, 0x22, genLocalCnt) // add; local.tee
		g.i64(int64(1 + g.rng.IntN(300)))
		g.op(0x54, 0x0d, 0, 0x0b) // i64.lt_u; br_if 0; end
	case 3: // early return
		g.expr(d)
		g.op(0x50, 0x04, 0x40) // eqz; if
		g.expr(d)
		g.op(0x0f, 0x0b) // return; end
	case 4: // rarely, an endless loop
		if g.rng.IntN(10) == 0 {
			g.op(0x03, 0x40)
			g.stmt(d, true)
			g.op(0x0c, 0, 0x0b)
		}
	default:
		g.expr(d)
		g.op(0x1a)
	}
}

func section(id byte, body []byte) []byte {
	out := []byte{id}
	out = appendULEB(out, uint32(len(body)))
	return append(out, body...)
}

func appendULEB(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func vecOf(items ...[]byte) []byte {
	out := appendULEB(nil, uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func withSize(b []byte) []byte { return append(appendULEB(nil, uint32(len(b))), b...) }

func name(s string) []byte { return withSize([]byte(s)) }

// generateModule returns the module for seed.
func generateModule(seed uint64) []byte {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 0x5eed)), funcs: 2 + int(seed%4)}
	types := vecOf(
		[]byte{0x60, 4, 0x7f, 0x7f, 0x7f, 0x7f, 1, 0x7f}, // fd_write
		[]byte{0x60, 0, 0},             // _start
		[]byte{0x60, 1, 0x7e, 1, 0x7e}, // generated
	)
	imports := vecOf(append(append(name("wasi_snapshot_preview1"), name("fd_write")...), 0, 0))
	fs := []byte{1}
	for i := 0; i < g.funcs; i++ {
		fs = append(fs, 2)
	}
	funcSec := appendULEB(nil, uint32(len(fs)))
	funcSec = append(funcSec, fs...)
	memory := []byte{1, 0, 1}
	exports := vecOf(append(name("_start"), 0, 1), append(name("memory"), 2, 0))

	var codes [][]byte
	// _start: mem[1024] = f0(seed); write mem[0..1032) to stdout.
	g.b = nil
	g.i32(1024)
	g.i64(int64(seed % 1000))
	g.op(0x10, 2, 0x37, 3, 0) // call f0; i64.store
	g.i32(2048)
	g.i32(0)
	g.op(0x36, 2, 0) // i32.store (iov.buf = 0)
	g.i32(2052)
	g.i32(1032)
	g.op(0x36, 2, 0)
	g.i32(1)
	g.i32(2048)
	g.i32(1)
	g.i32(2056)
	g.op(0x10, 0, 0x1a, 0x0b) // call fd_write; drop; end
	codes = append(codes, withSize(append([]byte{0}, g.b...)))
	for k := 0; k < g.funcs; k++ {
		g.k = k
		g.b = []byte{1, 2, 0x7e} // locals: 2 x i64 (counter, accumulator)
		depth := 2 + g.rng.IntN(3)
		for s := g.rng.IntN(4); s > 0; s-- {
			g.stmt(depth, false)
		}
		g.expr(depth)
		g.op(0x0b)
		codes = append(codes, withSize(g.b))
	}
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	out = append(out, section(1, types)...)
	out = append(out, section(2, imports)...)
	out = append(out, section(3, funcSec)...)
	out = append(out, section(5, memory)...)
	out = append(out, section(7, exports)...)
	out = append(out, section(10, vecOf(codes...))...)
	return out
}

var corpusLimits = Limits{Fuel: 100_000, MemoryPages: 16, OutputBytes: 4096, CallDepth: 200}

// TestGeneratedCorpusAgreesAcrossEngines runs corpusN() generated modules
// on the compiler and the interpreter: each must give the same outcome,
// result hash and fuel used. Without -race it runs 1000 (about 10 s here);
// -corpus.n=20000 runs more.
func TestGeneratedCorpusAgreesAcrossEngines(t *testing.T) {
	comp, interp := runners(t)
	ctx := context.Background()
	counts := map[Outcome]int{}
	n := corpusN()
	for seed := uint64(0); seed < uint64(n); seed++ {
		mod := generateModule(seed)
		c, err := comp.Run(ctx, mod, nil, corpusLimits)
		if err != nil {
			t.Fatalf("seed %d: compiler: %v", seed, err)
		}
		in, err := interp.Run(ctx, mod, nil, corpusLimits)
		if err != nil {
			t.Fatalf("seed %d: interpreter: %v", seed, err)
		}
		if c.Outcome != in.Outcome || c.Hash != in.Hash || c.Fuel != in.Fuel || !bytes.Equal(c.Output, in.Output) {
			t.Fatalf("seed %d: compiler %s %x fuel %d (%s), interpreter %s %x fuel %d (%s)",
				seed, c.Outcome, c.Hash[:6], c.Fuel, c.Detail, in.Outcome, in.Hash[:6], in.Fuel, in.Detail)
		}
		counts[c.Outcome]++
	}
	t.Logf("outcomes over %d modules: %v", n, counts)
	if n >= 250 {
		for _, o := range []Outcome{OK, OutOfFuel, Trap} {
			if counts[o] == 0 {
				t.Errorf("no module ended %s: the corpus does not exercise it", o)
			}
		}
	}
}
