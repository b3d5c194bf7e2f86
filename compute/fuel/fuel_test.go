package fuel

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// mod assembles a module from raw sections (id, body) after the header.
func mod(sections ...[]byte) []byte {
	out := append([]byte(nil), magicVersion...)
	for _, s := range sections {
		out = append(out, s[0])
		out = appendU32(out, uint32(len(s)-1))
		out = append(out, s[1:]...)
	}
	return out
}

// oneFunc is a module with one function of type () -> () and the body given
// (locals declaration included), exported as _start.
func oneFunc(body ...byte) []byte {
	code := appendU32(nil, uint32(len(body)))
	code = append(code, body...)
	return mod(
		[]byte{secType, 1, 0x60, 0, 0},
		[]byte{secFunction, 1, 0},
		append([]byte{secExport, 1, 6}, append([]byte("_start"), 0, 0)...),
		append([]byte{secCode, 1}, code...),
	)
}

// compiles reports whether wazero accepts b with the features the sandbox
// runs (WebAssembly 2.0 without SIMD).
func compiles(t testing.TB, rt wazero.Runtime, b []byte) error {
	t.Helper()
	cm, err := rt.CompileModule(context.Background(), b)
	if err == nil {
		_ = cm.Close(context.Background())
	}
	return err
}

func interpreter(t testing.TB) wazero.Runtime {
	rt := wazero.NewRuntimeWithConfig(context.Background(),
		wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2&^api.CoreFeatureSIMD))
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

func TestMeterRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		module []byte
		want   string
	}{
		{"not wasm", []byte("\x00asm\x02\x00\x00\x00"), "magic or version"},
		{"simd opcode", oneFunc(0, 0xfd, 0x0c), "SIMD"},
		{"atomic opcode", oneFunc(0, 0xfe, 0x03, 0x00, 0x0b), "threads"},
		{"v128 local", oneFunc(1, 1, typeV128, 0x0b), "SIMD"},
		{"try", oneFunc(0, 0x06, 0x40, 0x0b, 0x0b), "exception"},
		{"return_call", oneFunc(0, 0x12, 0, 0x0b), "tail calls"},
		{"too many locals", oneFunc(1, 0xff, 0xff, 0x03, typeI32, 0x0b), "locals"},
		{"start section", mod([]byte{secType, 1, 0x60, 0, 0}, []byte{secFunction, 1, 0}, []byte{secStart, 0}, []byte{secCode, 1, 2, 0, 0x0b}), "start section"},
		{"shared memory", mod([]byte{secMemory, 1, 0x03, 1, 1}), "shared memory"},
		{"second memory", mod([]byte{secMemory, 2, 0, 1, 0, 1}), "multiple memories"},
		{"branch past the function", oneFunc(0, 0x0c, 1, 0x0b), "branch depth"},
		{"truncated", oneFunc(0, 0x41), "end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Meter(tc.module)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestMeterCharges reads back the charges the pass emits for a known body.
func TestMeterCharges(t *testing.T) {
	// loop (i32.const 1, br_if 0) end: the loop header starts a segment of
	// 2 instructions (const, br_if); the function entry's segment is
	// loop + end-of-loop... end of function.
	body := []byte{0, opLoop, 0x40, opI32Const, 1, opBrIf, 0, opEnd, opEnd}
	out, info, err := Meter(oneFunc(body...))
	if err != nil {
		t.Fatal(err)
	}
	if info.Functions != 1 || len(info.Imports) != 0 {
		t.Fatalf("info %+v", info)
	}
	if err := compiles(t, interpreter(t), out); err != nil {
		t.Fatalf("metered module does not compile: %v", err)
	}
	// Charges are "global.get fuel; i64.const c; i64.sub": collect each c.
	charge := []byte{opGlobalGet, 0, opI64Const}
	var costs []byte
	for i := 0; i+4 < len(out); i++ {
		if bytes.Equal(out[i:i+3], charge) && out[i+4] == opI64Sub {
			costs = append(costs, out[i+3])
		}
	}
	// entry: [loop] = 1; loop body: [i32.const, br_if] = 2; after br_if:
	// [end(loop), end(function)] = 2.
	if !bytes.Equal(costs, []byte{1, 2, 2}) {
		t.Fatalf("charges %v, want [1 2 2]", costs)
	}
}

func TestMeterOutputIsValid(t *testing.T) {
	rt := interpreter(t)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"empty", []byte{0, opEnd}},
		{"return", []byte{0, opReturn, opEnd}},
		{"nested return", []byte{0, opBlock, 0x40, opLoop, 0x40, opReturn, opEnd, opEnd, opEnd}},
		{"if else", []byte{0, opI32Const, 0, opIf, 0x40, opElse, opEnd, opEnd}},
		{"br_table", []byte{0, opBlock, 0x40, opI32Const, 0, opBrTable, 1, 0, 1, opEnd, opEnd}},
		{"memory.grow", nil},
		{"float", []byte{1, 1, typeF64, opLocalGet, 0, opLocalGet, 0, 0xa3, 0x1a, opEnd}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := oneFunc(tc.body...)
			if tc.body == nil {
				m = mod(
					[]byte{secType, 1, 0x60, 0, 0},
					[]byte{secFunction, 1, 0},
					[]byte{secMemory, 1, 0, 1},
					[]byte{secCode, 1, 7, 0, opI32Const, 1, opMemoryGrow, 0, 0x1a, opEnd},
				)
			}
			if err := compiles(t, rt, m); err != nil {
				t.Fatalf("test module invalid: %v", err)
			}
			out, _, err := Meter(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := compiles(t, rt, out); err != nil {
				t.Fatalf("metered module invalid: %v", err)
			}
		})
	}
}

// FuzzMeter feeds the pass arbitrary bytes: it must never panic, and when
// wazero accepts the input and the pass does too, wazero must accept the
// output (the pass never breaks a valid module).
func FuzzMeter(f *testing.F) {
	f.Add(oneFunc(0, opEnd))
	f.Add(oneFunc(0, opLoop, 0x40, opI32Const, 1, opBrIf, 0, opEnd, opEnd))
	f.Add(oneFunc(1, 1, typeF64, opLocalGet, 0, opF64Const, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 0xa0, 0x1a, opEnd))
	f.Add(oneFunc(0, opBlock, 0x40, opI32Const, 0, opBrTable, 1, 0, 1, opEnd, opEnd))
	f.Add(mod([]byte{secType, 1, 0x60, 0, 2, typeI32, typeI64}, []byte{secFunction, 1, 0},
		[]byte{secCode, 1, 6, 0, opI32Const, 1, opI64Const, 2, opEnd}))
	f.Add(mod([]byte{secType, 1, 0x60, 0, 0}, []byte{secFunction, 1, 0}, []byte{secMemory, 1, 0, 1},
		[]byte{secCode, 1, 7, 0, opI32Const, 1, opMemoryGrow, 0, 0x1a, opEnd}))
	// An element count of 100M in a four-byte section: wazero's decoder
	// would allocate for it; the pass refuses it.
	f.Add([]byte("\x00asm\x01\x00\x00\x00\t\x04\xa6\xa6\xa60"))
	rt := interpreter(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := Meter(b)
		if err != nil {
			return
		}
		// wazero decodes the name section of its input, unbounded; the
		// pass drops custom sections, so only inputs without them are
		// compiled here.
		m, _ := parse(b)
		for _, s := range m.sections {
			if s.id == secCustom {
				return
			}
		}
		if compiles(t, rt, b) != nil {
			return
		}
		if err := compiles(t, rt, out); err != nil {
			t.Fatalf("valid module metered into an invalid one: %v", err)
		}
		// Metering is a pure function: the same bytes give the same module.
		again, _, err := Meter(b)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("metering is not deterministic: %v", err)
		}
	})
}

func TestErrRefusedWraps(t *testing.T) {
	_, _, err := Meter(oneFunc(0, 0xfd, 0x0c))
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("%v does not wrap ErrRefused", err)
	}
}
