package fuel

import (
	"bytes"
	"errors"
	"fmt"
)

// Names under which the metered module exports the globals the pass adds.
// A module that already exports one of these names is refused.
const (
	ExportFuel     = "fleetmesh_fuel"      // i64, fuel left; the host sets it before _start
	ExportDepth    = "fleetmesh_depth"     // i32, call frames left; the host sets it
	ExportMaxPages = "fleetmesh_max_pages" // i64, the most 64 KiB pages memory may grow to
	ExportReason   = "fleetmesh_reason"    // i32, why an added check trapped (Reason*)
)

// Values of the reason global after a trap.
const (
	ReasonNone   = 0 // the program's own trap, or no trap
	ReasonFuel   = 1 // out of fuel
	ReasonDepth  = 2 // call depth exhausted
	ReasonMemory = 3 // memory.grow or table.grow past its bound
)

// Costs and bounds of the metering pass. They are part of what a result
// means: two nodes agree on fuel used only if they meter with the same
// values, so they are constants and listed in spec/limits.md.
const (
	// MaxLocals bounds params plus locals of one function, so that a frame
	// stays small against both engines' stack limits.
	MaxLocals = 10000
	// MaxTableElements bounds table.grow.
	MaxTableElements = 1 << 16
	// PageCost is the fuel charged per 64 KiB page memory.grow adds.
	PageCost = 1024
	// BulkShift sets bulk memory cost: one fuel per 2^BulkShift bytes.
	BulkShift = 6
)

// ErrRefused wraps every reason a module cannot be metered because it uses
// something the sandbox does not run (SIMD, threads, a start section...).
var ErrRefused = errors.New("module refused")

// Import is one import of the module, for the caller's allow-list.
type Import struct {
	Module, Name string
	Kind         byte // 0 function, 1 table, 2 memory, 3 global
}

// Info describes the module the pass metered.
type Info struct {
	Imports     []Import
	Functions   int    // defined functions
	MemoryPages uint32 // the memory's initial size, in 64 KiB pages
}

// Section ids and their required order.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// sectionRank orders the known non-custom sections as the spec requires.
var sectionRank = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10,
	secDataCount: 11, secCode: 12, secData: 13,
}

type funcType struct{ params, results []byte }

type section struct {
	id   byte
	body []byte
}

// module is what the pass reads of a module: enough to rewrite code and to
// append globals, exports and types.
type module struct {
	sections    []section
	types       []funcType
	funcs       []uint32 // type index of each defined function
	importFuncs uint32
	importGlobs uint32
	memories    int
	globalCount uint32
	globalRest  []byte // global section after its count
	exports     []byte // export section after its count
	exportCount uint32
	codes       [][]byte
	dataCount   *uint32
	info        Info
}

var magicVersion = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// Meter returns the module rewritten with fuel, call-depth, memory and NaN
// checks (see the package doc), and what it imports. An error wraps
// ErrRefused when the module uses something the sandbox does not run;
// other errors say where the bytes are malformed. Meter never panics.
func Meter(wasm []byte) ([]byte, Info, error) {
	m, err := parse(wasm)
	if err != nil {
		return nil, Info{}, err
	}
	out, err := m.rewrite()
	if err != nil {
		return nil, Info{}, err
	}
	return out, m.info, nil
}

func parse(b []byte) (*module, error) {
	if len(b) < 8 || !bytes.Equal(b[:8], magicVersion) {
		return nil, errors.New("not a WebAssembly 1.0 binary module (bad magic or version)")
	}
	r := &reader{b: b, pos: 8}
	m := &module{}
	lastRank := 0
	for !r.done() {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("section %d size: %w", id, err)
		}
		body, err := r.bytes(size)
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		if id == secCustom {
			m.sections = append(m.sections, section{id, body})
			continue
		}
		switch id {
		case secStart:
			return nil, fmt.Errorf("%w: a start section (a WASI command starts at _start)", ErrRefused)
		case secTag:
			return nil, fmt.Errorf("%w: exception handling (tag section)", ErrRefused)
		}
		rank, ok := sectionRank[id]
		if !ok {
			return nil, fmt.Errorf("unknown section id %d", id)
		}
		if rank <= lastRank {
			return nil, fmt.Errorf("section %d out of order or repeated", id)
		}
		lastRank = rank
		if err := m.readSection(id, body); err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		m.sections = append(m.sections, section{id, body})
	}
	if len(m.codes) != len(m.funcs) {
		return nil, fmt.Errorf("%d functions declared but %d bodies", len(m.funcs), len(m.codes))
	}
	m.info.Functions = len(m.funcs)
	return m, nil
}

func (m *module) readSection(id byte, body []byte) error {
	r := &reader{b: body}
	n, err := r.u32()
	if err != nil {
		return err
	}
	// Every entry of a vector takes at least one byte. Checking this for
	// every section, including those the pass copies unread, keeps a
	// five-byte count from making anyone allocate for billions of entries.
	if id != secDataCount && uint64(n) > uint64(len(body)-r.pos) {
		return fmt.Errorf("count %d exceeds the section's %d bytes", n, len(body))
	}
	switch id {
	case secType:
		for i := uint32(0); i < n; i++ {
			form, err := r.byte()
			if err != nil {
				return err
			}
			if form != 0x60 {
				return fmt.Errorf("%w: type form 0x%02x (only function types)", ErrRefused, form)
			}
			var ft funcType
			if ft.params, err = r.valTypes(); err != nil {
				return err
			}
			if ft.results, err = r.valTypes(); err != nil {
				return err
			}
			m.types = append(m.types, ft)
		}
	case secImport:
		for i := uint32(0); i < n; i++ {
			var im Import
			if im.Module, err = r.name(); err != nil {
				return err
			}
			if im.Name, err = r.name(); err != nil {
				return err
			}
			if im.Kind, err = r.byte(); err != nil {
				return err
			}
			switch im.Kind {
			case 0:
				if _, err = r.u32(); err != nil {
					return err
				}
				m.importFuncs++
			case 1:
				if _, err = r.valType(); err != nil {
					return err
				}
				if _, err = r.limits(false); err != nil {
					return err
				}
			case 2:
				if m.info.MemoryPages, err = r.limits(true); err != nil {
					return err
				}
				m.memories++
			case 3:
				if _, err = r.valType(); err != nil {
					return err
				}
				if _, err = r.byte(); err != nil {
					return err
				}
				m.importGlobs++
			case 4:
				return fmt.Errorf("%w: exception handling (tag import)", ErrRefused)
			default:
				return fmt.Errorf("import kind 0x%02x", im.Kind)
			}
			m.info.Imports = append(m.info.Imports, im)
		}
	case secFunction:
		for i := uint32(0); i < n; i++ {
			t, err := r.u32()
			if err != nil {
				return err
			}
			if int(t) >= len(m.types) {
				return fmt.Errorf("function %d has type %d of %d", i, t, len(m.types))
			}
			m.funcs = append(m.funcs, t)
		}
	case secTable:
		for i := uint32(0); i < n; i++ {
			if _, err = r.valType(); err != nil {
				return err
			}
			if _, err = r.limits(false); err != nil {
				return err
			}
		}
	case secMemory:
		for i := uint32(0); i < n; i++ {
			if m.info.MemoryPages, err = r.limits(true); err != nil {
				return err
			}
			m.memories++
		}
	case secDataCount:
		m.dataCount = &n
	case secData:
		if m.dataCount != nil && *m.dataCount != n {
			return fmt.Errorf("data count section says %d segments, data section has %d", *m.dataCount, n)
		}
		for i := uint32(0); i < n; i++ {
			if err := r.dataSegment(); err != nil {
				return err
			}
		}
	case secElement:
		for i := uint32(0); i < n; i++ {
			if err := r.elementSegment(); err != nil {
				return err
			}
		}
	case secGlobal:
		m.globalCount = n
		m.globalRest = body[r.pos:]
		r.pos = len(r.b)
	case secExport:
		m.exportCount = n
		m.exports = body[r.pos:]
		for i := uint32(0); i < n; i++ {
			name, err := r.name()
			if err != nil {
				return err
			}
			switch name {
			case ExportFuel, ExportDepth, ExportMaxPages, ExportReason:
				return fmt.Errorf("%w: export name %q is reserved for metering", ErrRefused, name)
			}
			if _, err = r.byte(); err != nil {
				return err
			}
			if _, err = r.u32(); err != nil {
				return err
			}
		}
	case secCode:
		for i := uint32(0); i < n; i++ {
			size, err := r.u32()
			if err != nil {
				return err
			}
			code, err := r.bytes(size)
			if err != nil {
				return err
			}
			m.codes = append(m.codes, code)
		}
	default:
		r.pos = len(r.b)
	}
	if m.memories > 1 {
		return fmt.Errorf("%w: multiple memories", ErrRefused)
	}
	if !r.done() {
		return errors.New("section longer than its contents")
	}
	return nil
}

// count reads a vector length and checks the bytes left could hold it.
func (r *reader) count() (uint32, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(n) > uint64(len(r.b)-r.pos) {
		return 0, fmt.Errorf("vector of %d entries in %d bytes", n, len(r.b)-r.pos)
	}
	return n, nil
}

// constExpr skips a constant expression up to its end.
func (r *reader) constExpr() error {
	for {
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch op {
		case opEnd:
			return nil
		case opI32Const:
			_, err = r.signed(32)
		case opI64Const:
			_, err = r.signed(64)
		case opF32Const:
			_, err = r.bytes(4)
		case opF64Const:
			_, err = r.bytes(8)
		case 0xd0: // ref.null
			_, err = r.byte()
		case 0xd2, opGlobalGet: // ref.func, global.get
			_, err = r.u32()
		case opI32Add, opI32Sub, 0x6c, opI64Add, opI64Sub, opI64Mul: // extended constants
		default:
			return fmt.Errorf("opcode 0x%02x in a constant expression", op)
		}
		if err != nil {
			return err
		}
	}
}

func (r *reader) dataSegment() error {
	flags, err := r.u32()
	if err != nil {
		return err
	}
	switch flags {
	case 0:
		err = r.constExpr()
	case 1:
	case 2:
		if err = r.zeroByte(); err == nil {
			err = r.constExpr()
		}
	default:
		return fmt.Errorf("data segment flags %d", flags)
	}
	if err != nil {
		return err
	}
	n, err := r.count()
	if err != nil {
		return err
	}
	_, err = r.bytes(n)
	return err
}

func (r *reader) elementSegment() error {
	flags, err := r.u32()
	if err != nil {
		return err
	}
	if flags > 7 {
		return fmt.Errorf("element segment flags %d", flags)
	}
	if flags&2 != 0 && flags&1 == 0 { // explicit table index
		if _, err = r.u32(); err != nil {
			return err
		}
	}
	if flags&1 == 0 { // active: an offset
		if err = r.constExpr(); err != nil {
			return err
		}
	}
	if flags&3 != 0 { // an element kind or reference type
		if _, err = r.byte(); err != nil {
			return err
		}
	}
	n, err := r.count()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		if flags&4 != 0 {
			err = r.constExpr()
		} else {
			_, err = r.u32()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *reader) valTypes() ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(r.b)-r.pos) {
		return nil, errEOF
	}
	ts := make([]byte, 0, n)
	for i := uint32(0); i < n; i++ {
		t, err := r.valType()
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// limits reads table or memory limits, refusing shared and 64-bit memories.
func (r *reader) limits(memory bool) (min uint32, err error) {
	flags, err := r.byte()
	if err != nil {
		return 0, err
	}
	if memory && flags&0x02 != 0 {
		return 0, fmt.Errorf("%w: threads (shared memory)", ErrRefused)
	}
	if memory && flags&0x04 != 0 {
		return 0, fmt.Errorf("%w: 64-bit memory", ErrRefused)
	}
	if flags > 1 {
		return 0, fmt.Errorf("limits flags 0x%02x", flags)
	}
	if min, err = r.u32(); err != nil {
		return 0, err
	}
	if !memory && min > MaxTableElements {
		return 0, fmt.Errorf("%w: a table of %d elements (at most %d)", ErrRefused, min, MaxTableElements)
	}
	if flags == 1 {
		_, err = r.u32()
	}
	return min, err
}

// rewrite assembles the metered module.
func (m *module) rewrite() ([]byte, error) {
	g := globals{
		fuel:     m.importGlobs + m.globalCount,
		depth:    m.importGlobs + m.globalCount + 1,
		maxPages: m.importGlobs + m.globalCount + 2,
		reason:   m.importGlobs + m.globalCount + 3,
	}
	extraTypes := map[string]uint32{}
	var newTypes []funcType
	codes := make([][]byte, len(m.codes))
	for i, code := range m.codes {
		ft := m.types[m.funcs[i]]
		var bt []byte
		switch len(ft.results) {
		case 0:
			bt = []byte{0x40}
		case 1:
			bt = []byte{ft.results[0]}
		default:
			key := string(ft.results)
			idx, ok := extraTypes[key]
			if !ok {
				idx = uint32(len(m.types) + len(newTypes))
				newTypes = append(newTypes, funcType{results: ft.results})
				extraTypes[key] = idx
			}
			bt = appendS64(nil, int64(idx))
		}
		out, err := meterCode(code, uint32(len(ft.params)), bt, g)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", m.importFuncs+uint32(i), err)
		}
		codes[i] = out
	}

	newSection := map[byte][]byte{}
	if len(newTypes) > 0 {
		b := appendU32(nil, uint32(len(m.types)+len(newTypes)))
		for _, ft := range m.types {
			b = appendType(b, ft)
		}
		for _, ft := range newTypes {
			b = appendType(b, ft)
		}
		newSection[secType] = b
	}
	gb := appendU32(nil, m.globalCount+4)
	gb = append(gb, m.globalRest...)
	gb = append(gb, typeI64, 1, 0x42, 0, 0x0b) // fuel
	gb = append(gb, typeI32, 1, 0x41, 0, 0x0b) // depth
	gb = append(gb, typeI64, 1, 0x42, 0, 0x0b) // max pages
	gb = append(gb, typeI32, 1, 0x41, 0, 0x0b) // reason
	newSection[secGlobal] = gb
	eb := appendU32(nil, m.exportCount+4)
	eb = append(eb, m.exports...)
	for _, e := range []struct {
		name string
		idx  uint32
	}{{ExportFuel, g.fuel}, {ExportDepth, g.depth}, {ExportMaxPages, g.maxPages}, {ExportReason, g.reason}} {
		eb = appendName(eb, e.name)
		eb = append(eb, 0x03)
		eb = appendU32(eb, e.idx)
	}
	newSection[secExport] = eb
	cb := appendU32(nil, uint32(len(codes)))
	for _, c := range codes {
		cb = appendU32(cb, uint32(len(c)))
		cb = append(cb, c...)
	}
	newSection[secCode] = cb

	out := append([]byte(nil), magicVersion...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	// Sections the module lacks but the pass adds go where the order puts them.
	pending := []byte{secGlobal, secExport}
	flushBefore := func(rank int) {
		for len(pending) > 0 && sectionRank[pending[0]] < rank {
			id := pending[0]
			pending = pending[1:]
			emit(id, newSection[id])
			delete(newSection, id)
		}
	}
	for _, s := range m.sections {
		if s.id == secCustom {
			continue // names and other custom data: not needed to run
		}
		rank := sectionRank[s.id]
		flushBefore(rank)
		if body, ok := newSection[s.id]; ok {
			emit(s.id, body)
			delete(newSection, s.id)
			for i, id := range pending {
				if id == s.id {
					pending = append(pending[:i], pending[i+1:]...)
					break
				}
			}
			continue
		}
		emit(s.id, s.body)
	}
	flushBefore(1 << 30)
	return out, nil
}

func appendType(b []byte, ft funcType) []byte {
	b = append(b, 0x60)
	b = appendU32(b, uint32(len(ft.params)))
	b = append(b, ft.params...)
	b = appendU32(b, uint32(len(ft.results)))
	return append(b, ft.results...)
}
