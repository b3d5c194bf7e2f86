package fuel

import (
	"errors"
	"fmt"
)

// globals are the indices of the globals the pass adds.
type globals struct{ fuel, depth, maxPages, reason uint32 }

// Opcodes the rewriter emits or treats specially.
const (
	opUnreachable = 0x00
	opBlock       = 0x02
	opLoop        = 0x03
	opIf          = 0x04
	opElse        = 0x05
	opEnd         = 0x0b
	opBr          = 0x0c
	opBrIf        = 0x0d
	opBrTable     = 0x0e
	opReturn      = 0x0f
	opSelect      = 0x1b
	opLocalGet    = 0x20
	opLocalSet    = 0x21
	opLocalTee    = 0x22
	opGlobalGet   = 0x23
	opGlobalSet   = 0x24
	opMemorySize  = 0x3f
	opMemoryGrow  = 0x40
	opI32Const    = 0x41
	opI64Const    = 0x42
	opF32Const    = 0x43
	opF64Const    = 0x44
	opI32Eqz      = 0x45
	opI64LtS      = 0x53
	opI64GtU      = 0x56
	opF32Eq       = 0x5b
	opF64Eq       = 0x61
	opI32Add      = 0x6a
	opI32Sub      = 0x6b
	opI64Add      = 0x7c
	opI64Sub      = 0x7d
	opI64Mul      = 0x7e
	opI64ShrU     = 0x88
	opI64ExtendU  = 0xad
	opPrefixFC    = 0xfc
	opPrefixSIMD  = 0xfd
	opPrefixAtom  = 0xfe
)

type frameKind byte

const (
	kindBlock frameKind = iota
	kindLoop
	kindIf
	kindElse
)

type frame struct {
	kind     frameKind
	targeted bool
}

// coder rewrites one function body.
type coder struct {
	r    *reader
	g    globals
	out  []byte // the rewritten body so far
	seg  []byte // the current straight-line segment, not yet charged
	cost int64  // instructions in seg
	// checkNext says the segment being gathered starts a function or a
	// loop body, so its charge checks the fuel left.
	checkNext bool
	ctl       []frame
	t32       uint32 // scratch locals the pass adds
	t64       uint32
	tf32      uint32
	tf64      uint32
}

// meterCode rewrites one code entry (locals and body) of a function with
// nparams params and the wrapper block type bt.
func meterCode(code []byte, nparams uint32, bt []byte, g globals) ([]byte, error) {
	r := &reader{b: code}
	groups, err := r.u32()
	if err != nil {
		return nil, err
	}
	locals := uint64(nparams)
	var decl []byte
	for i := uint32(0); i < groups; i++ {
		n, err := r.u32()
		if err != nil {
			return nil, err
		}
		t, err := r.valType()
		if err != nil {
			return nil, err
		}
		locals += uint64(n)
		if locals > MaxLocals {
			return nil, fmt.Errorf("%w: more than %d params and locals in one function", ErrRefused, MaxLocals)
		}
		decl = appendU32(decl, n)
		decl = append(decl, t)
	}
	c := &coder{r: r, g: g, checkNext: true}
	base := uint32(locals)
	c.t32, c.t64, c.tf32, c.tf64 = base, base+1, base+2, base+3
	c.out = appendU32(c.out, groups+4)
	c.out = append(c.out, decl...)
	c.out = append(c.out, 1, typeI32, 1, typeI64, 1, typeF32, 1, typeF64)

	// Prologue: take a frame or trap, then open the block that every way
	// out of the function (falling off, return, a branch to the function's
	// label) leaves through, so the frame is given back in one place.
	c.out = append(c.out, opGlobalGet)
	c.out = appendU32(c.out, g.depth)
	c.out = append(c.out, opI32Eqz, opIf, 0x40)
	c.out = c.trap(c.out, ReasonDepth)
	c.out = append(c.out, opEnd, opGlobalGet)
	c.out = appendU32(c.out, g.depth)
	c.out = append(c.out, opI32Const, 1, opI32Sub, opGlobalSet)
	c.out = appendU32(c.out, g.depth)
	// An empty loop: wazero's close-on-context-done checks at loop
	// headers, so this lets a deadline stop loop-free recursion too.
	c.out = append(c.out, opLoop, 0x40, opEnd)
	c.out = append(c.out, opBlock)
	c.out = append(c.out, bt...)

	if err := c.body(); err != nil {
		return nil, err
	}
	c.flush()
	c.out = append(c.out, opEnd, opGlobalGet)
	c.out = appendU32(c.out, g.depth)
	c.out = append(c.out, opI32Const, 1, opI32Add, opGlobalSet)
	c.out = appendU32(c.out, g.depth)
	c.out = append(c.out, opEnd)
	return c.out, nil
}

// trap appends code that records why and traps.
func (c *coder) trap(b []byte, reason byte) []byte {
	b = append(b, opI32Const, reason, opGlobalSet)
	b = appendU32(b, c.g.reason)
	return append(b, opUnreachable)
}

// flush charges the current segment and moves it to the output. A segment
// that starts a function or a loop body checks the fuel left and traps
// when the charge would take it below zero; others only subtract, and may
// take it below zero, which the next check (at the latest at the next loop
// header or function entry, since nothing else repeats) turns into a trap.
// Checking only there keeps the common charge to four instructions; the
// point where a run stops is still the same on every engine.
func (c *coder) flush() {
	if c.cost > 0 {
		c.out = append(c.out, opGlobalGet)
		c.out = appendU32(c.out, c.g.fuel)
		c.out = append(c.out, opI64Const)
		c.out = appendS64(c.out, c.cost)
		if c.checkNext {
			c.out = c.checkAndStore(c.out)
		} else {
			c.out = append(c.out, opI64Sub, opGlobalSet)
			c.out = appendU32(c.out, c.g.fuel)
		}
	}
	c.out = append(c.out, c.seg...)
	c.seg = c.seg[:0]
	c.cost = 0
	c.checkNext = false
}

// checkAndStore appends, with fuel and a charge on the stack: subtract,
// trap if the result is negative, else store it.
func (c *coder) checkAndStore(b []byte) []byte {
	b = append(b, opI64Sub, opLocalTee)
	b = appendU32(b, c.t64)
	b = append(b, opI64Const, 0, opI64LtS, opIf, 0x40)
	b = c.trap(b, ReasonFuel)
	b = append(b, opEnd, opLocalGet)
	b = appendU32(b, c.t64)
	b = append(b, opGlobalSet)
	return appendU32(b, c.g.fuel)
}

// chargeLocal appends a charge of t32 * mul >> shift fuel.
func (c *coder) chargeLocal(mul int64, shift byte) {
	s := append(c.seg, opGlobalGet)
	s = appendU32(s, c.g.fuel)
	s = append(s, opLocalGet)
	s = appendU32(s, c.t32)
	s = append(s, opI64ExtendU)
	if mul != 1 {
		s = append(s, opI64Const)
		s = appendS64(s, mul)
		s = append(s, opI64Mul)
	}
	if shift != 0 {
		s = append(s, opI64Const, shift, opI64ShrU)
	}
	c.seg = c.checkAndStore(s)
}

// growCheck appends, with the grow delta in t32 and the current size on
// the stack as i32: trap if size + delta exceeds the bound pushed by limit.
func (c *coder) growCheck(limit []byte) {
	s := append(c.seg, opI64ExtendU, opLocalGet)
	s = appendU32(s, c.t32)
	s = append(s, opI64ExtendU, opI64Add)
	s = append(s, limit...)
	s = append(s, opI64GtU, opIf, 0x40)
	s = c.trap(s, ReasonMemory)
	c.seg = append(s, opEnd)
}

func (c *coder) localOp(op byte, idx uint32) {
	c.seg = append(c.seg, op)
	c.seg = appendU32(c.seg, idx)
}

var errBranchDepth = errors.New("branch depth out of range")

// target notes that a branch of relative depth l was seen.
func (c *coder) target(l uint32) error {
	switch {
	case int64(l) < int64(len(c.ctl)):
		c.ctl[len(c.ctl)-1-int(l)].targeted = true
	case int64(l) > int64(len(c.ctl)):
		return errBranchDepth
	}
	return nil
}

// body walks the instructions up to and including the function's final end.
func (c *coder) body() error {
	r := c.r
	for {
		if r.done() {
			return errors.New("body ends without end")
		}
		start := r.pos
		op, _ := r.byte()
		boundary := false
		copyIt := true
		switch {
		case op == opUnreachable || op == 0x01: // unreachable, nop
			boundary = op == opUnreachable
		case op == opBlock || op == opLoop || op == opIf:
			if err := r.blockType(); err != nil {
				return err
			}
			kind := kindBlock
			switch op {
			case opLoop:
				kind = kindLoop
			case opIf:
				kind = kindIf
			}
			c.ctl = append(c.ctl, frame{kind: kind})
			boundary = op != opBlock
		case op == opElse:
			if len(c.ctl) == 0 || c.ctl[len(c.ctl)-1].kind != kindIf {
				return errors.New("else without if")
			}
			c.ctl[len(c.ctl)-1].kind = kindElse
			boundary = true
		case op == opEnd:
			if len(c.ctl) == 0 {
				if !r.done() {
					return errors.New("code after the function's end")
				}
				c.cost++ // the function's end
				return nil
			}
			f := c.ctl[len(c.ctl)-1]
			c.ctl = c.ctl[:len(c.ctl)-1]
			boundary = f.kind == kindIf || f.kind == kindElse || (f.kind == kindBlock && f.targeted)
		case op == opBr || op == opBrIf:
			l, err := r.u32()
			if err != nil {
				return err
			}
			if err := c.target(l); err != nil {
				return err
			}
			boundary = true
		case op == opBrTable:
			n, err := r.u32()
			if err != nil {
				return err
			}
			for i := uint64(0); i <= uint64(n); i++ {
				l, err := r.u32()
				if err != nil {
					return err
				}
				if err := c.target(l); err != nil {
					return err
				}
			}
			boundary = true
		case op == opReturn:
			c.seg = append(c.seg, opBr)
			c.seg = appendU32(c.seg, uint32(len(c.ctl)))
			copyIt = false
			boundary = true
		case op == 0x10: // call
			if _, err := r.u32(); err != nil {
				return err
			}
		case op == 0x11: // call_indirect
			if _, err := r.u32(); err != nil {
				return err
			}
			if _, err := r.u32(); err != nil {
				return err
			}
		case op >= 0x06 && op <= 0x0a, op == 0x18, op == 0x19, op == 0x1f:
			return fmt.Errorf("%w: exception handling (opcode 0x%02x)", ErrRefused, op)
		case op >= 0x12 && op <= 0x15:
			return fmt.Errorf("%w: tail calls or typed function references (opcode 0x%02x)", ErrRefused, op)
		case op == 0x1a || op == opSelect: // drop, select
		case op == 0x1c: // select t*
			n, err := r.u32()
			if err != nil {
				return err
			}
			for i := uint32(0); i < n; i++ {
				if _, err := r.valType(); err != nil {
					return err
				}
			}
		case op >= opLocalGet && op <= 0x26: // locals, globals, table.get/set
			if _, err := r.u32(); err != nil {
				return err
			}
		case op >= 0x28 && op <= 0x3e: // loads and stores
			if err := r.memarg(); err != nil {
				return err
			}
		case op == opMemorySize || op == opMemoryGrow:
			if err := r.zeroByte(); err != nil {
				return err
			}
			if op == opMemoryGrow {
				c.memoryGrow()
				copyIt = false
			}
		case op == opI32Const:
			if _, err := r.signed(32); err != nil {
				return err
			}
		case op == opI64Const:
			if _, err := r.signed(64); err != nil {
				return err
			}
		case op == opF32Const:
			if _, err := r.bytes(4); err != nil {
				return err
			}
		case op == opF64Const:
			if _, err := r.bytes(8); err != nil {
				return err
			}
		case op >= opI32Eqz && op <= 0xc4: // numeric, conversions, sign extension
		case op == 0xd0: // ref.null t
			if _, err := r.valType(); err != nil {
				return err
			}
		case op == 0xd1: // ref.is_null
		case op == 0xd2: // ref.func
			if _, err := r.u32(); err != nil {
				return err
			}
		case op == opPrefixFC:
			var err error
			copyIt, err = c.prefixFC(start)
			if err != nil {
				return err
			}
		case op == opPrefixSIMD:
			return fmt.Errorf("%w: SIMD (opcode 0xfd)", ErrRefused)
		case op == opPrefixAtom:
			return fmt.Errorf("%w: threads (atomic opcode 0xfe)", ErrRefused)
		default:
			return fmt.Errorf("%w: unknown or unsupported opcode 0x%02x", ErrRefused, op)
		}
		// A NaN's sign and payload bits are the engine's choice, and they
		// become observable only where a float is stored, reinterpreted as
		// an integer or lends its sign to copysign: canonicalise there,
		// with the float on top of the stack.
		switch op {
		case 0x38, 0xbc, 0x98: // f32.store, i32.reinterpret_f32, f32.copysign
			c.canonNaN(c.tf32, opF32Const, []byte{0x00, 0x00, 0xc0, 0x7f}, opF32Eq)
		case 0x39, 0xbd, 0xa6: // f64.store, i64.reinterpret_f64, f64.copysign
			c.canonNaN(c.tf64, opF64Const, []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}, opF64Eq)
		}
		if copyIt {
			c.seg = append(c.seg, r.b[start:r.pos]...)
		}
		c.cost++
		if boundary {
			c.flush()
			c.checkNext = op == opLoop
		}
	}
}

// canonNaN replaces the float on the stack by the canonical NaN if it is a NaN.
func (c *coder) canonNaN(tmp uint32, constOp byte, nan []byte, eqOp byte) {
	c.localOp(opLocalTee, tmp)
	c.seg = append(c.seg, constOp)
	c.seg = append(c.seg, nan...)
	c.localOp(opLocalGet, tmp)
	c.localOp(opLocalGet, tmp)
	c.seg = append(c.seg, eqOp, opSelect)
}

// memoryGrow appends a memory.grow that traps past the max-pages global and
// is charged per page.
func (c *coder) memoryGrow() {
	c.localOp(opLocalSet, c.t32)
	c.seg = append(c.seg, opMemorySize, 0)
	limit := appendU32([]byte{opGlobalGet}, c.g.maxPages)
	c.growCheck(limit)
	c.chargeLocal(PageCost, 0)
	c.localOp(opLocalGet, c.t32)
	c.seg = append(c.seg, opMemoryGrow, 0)
}

// prefixFC handles the 0xfc instructions: saturating conversions, bulk
// memory and table operations. It reports whether the original bytes are
// to be copied as they are.
func (c *coder) prefixFC(start int) (bool, error) {
	r := c.r
	sub, err := r.u32()
	if err != nil {
		return false, err
	}
	switch sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // trunc_sat
		return true, nil
	case 8: // memory.init data 0
		if _, err := r.u32(); err != nil {
			return false, err
		}
		if err := r.zeroByte(); err != nil {
			return false, err
		}
	case 9, 13: // data.drop, elem.drop
		_, err := r.u32()
		return true, err
	case 10: // memory.copy 0 0
		if err := r.zeroByte(); err != nil {
			return false, err
		}
		if err := r.zeroByte(); err != nil {
			return false, err
		}
	case 11: // memory.fill 0
		if err := r.zeroByte(); err != nil {
			return false, err
		}
	case 12, 14: // table.init elem table, table.copy table table
		if _, err := r.u32(); err != nil {
			return false, err
		}
		if _, err := r.u32(); err != nil {
			return false, err
		}
	case 15: // table.grow table
		table, err := r.u32()
		if err != nil {
			return false, err
		}
		c.localOp(opLocalSet, c.t32)
		c.seg = append(c.seg, opPrefixFC, 16)
		c.seg = appendU32(c.seg, table)
		limit := appendS64([]byte{opI64Const}, MaxTableElements)
		c.growCheck(limit)
		c.chargeLocal(1, 0)
		c.localOp(opLocalGet, c.t32)
		c.seg = append(c.seg, r.b[start:r.pos]...)
		return false, nil
	case 16: // table.size table
		_, err := r.u32()
		return true, err
	case 17: // table.fill table
		if _, err := r.u32(); err != nil {
			return false, err
		}
	default:
		return false, fmt.Errorf("%w: unknown or unsupported opcode 0xfc %d", ErrRefused, sub)
	}
	// Bulk operations: the length is on top of the stack; charge for it.
	c.localOp(opLocalTee, c.t32)
	shift := byte(BulkShift)
	if sub >= 12 {
		shift = 0
	}
	c.chargeLocal(1, shift)
	return true, nil
}

func (r *reader) zeroByte() error {
	b, err := r.byte()
	if err != nil {
		return err
	}
	if b != 0 {
		return fmt.Errorf("%w: multiple memories", ErrRefused)
	}
	return nil
}

func (r *reader) memarg() error {
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		return fmt.Errorf("%w: multiple memories", ErrRefused)
	}
	_, err = r.u32()
	return err
}

func (r *reader) blockType() error {
	if r.done() {
		return errEOF
	}
	switch r.b[r.pos] {
	case 0x40:
		r.pos++
		return nil
	case typeI32, typeI64, typeF32, typeF64, typeFuncref, typeExternref, typeV128:
		_, err := r.valType()
		return err
	}
	v, err := r.signed(33)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("block type %d", v)
	}
	return nil
}
