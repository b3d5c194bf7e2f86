package nostr

import (
	"sync"

	"github.com/btcsuite/btcd/btcec/v2"
)

// A keyTable lets the pure-Go check compute s·G + e·P, three quarters and
// more of a verification, with half the point doublings and fewer
// additions than btcec's ScalarBaseMultNonConst and ScalarMultNonConst.
//
// btcec starts from nothing on every call for e·P: it splits the 256-bit
// scalar in two 128-bit halves by the curve's endomorphism and walks them
// bit by bit in plain NAF (a third of the digits non-zero), so about 128
// doublings and 85 additions; s·G is 32 further additions from its fixed
// table, and one more joins the two. For a key it has seen before, a
// relay can afford to keep work done once: the table holds, for each of
// the four 64-bit slices of a scalar, the odd multiples 1, 3, 5, 7 of
// 2^(64j)·P in affine form. The generator gets the same, once per
// process, with odd multiples up to 511 (genTable). The check then walks
// the eight slices of s and e together, in width-10 NAF for s (an
// eleventh of the digits non-zero) and width-4 NAF for e (a fifth): 64
// doublings and about 77 mixed additions, against btcec's 128 and 86. That is the fixed-base comb
// idea applied to a variable key that the Verifier keeps anyway, with the
// slices' width-w NAFs interleaved (Hankerson, Menezes and Vanstone, Guide
// to Elliptic Curve Cryptography, §3.3: width-w NAF, fixed-base comb,
// interleaving).
//
// Building a key's table costs about three quarters of a verification
// (192 doublings to reach 2^192·P, twelve additions and one field
// inversion shared by all sixteen points), so the Verifier builds one only
// for a key it is asked about a second time. It takes 16 points of 80
// bytes; the generator's table 1,024 points, 80 KiB, which stays in a
// core's L2 cache (a wider table saved more additions but was no faster:
// docs/benchmarks/relay.md, "After per-key tables").
//
// Nothing here depends on a secret: keys, signatures and scalars are
// public, so non-constant time is fine, as it is in btcec's NonConst
// functions this is made of.
type keyTable struct {
	// pts[j*keyOdd+i] is (2i+1)·2^(64j)·P, with Z = 1 and normalized.
	pts []affinePoint
}

const (
	tableSlices = 4  // 64-bit slices of a 256-bit scalar
	sliceDigits = 65 // a 64-bit slice's wNAF can carry one digit out
	keyWidth    = 4  // wNAF width for the key's scalar
	keyOdd      = 1 << (keyWidth - 2)
	genWidth    = 10 // wNAF width for the generator's scalar
	genOdd      = 1 << (genWidth - 2)
)

// affinePoint is a normalized point with an implied Z of 1.
type affinePoint struct{ x, y btcec.FieldVal }

// newKeyTable precomputes the table for p, a point on the curve that is not
// the point at infinity (a lifted key never is).
func newKeyTable(p *btcec.JacobianPoint) *keyTable {
	return &keyTable{pts: oddMultiples(p, keyOdd)}
}

var (
	genOnce sync.Once
	genPts  []affinePoint
)

// genTable is the generator's table: (2i+1)·2^(64j)·G at j*genOdd+i.
func genTable() []affinePoint {
	genOnce.Do(func() {
		var g btcec.JacobianPoint
		var one btcec.ModNScalar
		one.SetInt(1)
		btcec.ScalarBaseMultNonConst(&one, &g)
		g.ToAffine()
		genPts = oddMultiples(&g, genOdd)
	})
	return genPts
}

// oddMultiples returns (2i+1)·2^(64j)·p at j*odd+i for the four slices
// j and i < odd, affine. No Z is zero on the way: each point is m·p with
// 0 < m < 2^(64·3+1)·odd < n, and p has order n.
func oddMultiples(p *btcec.JacobianPoint, odd int) []affinePoint {
	jac := make([]btcec.JacobianPoint, tableSlices*odd)
	base := *p
	for j := range tableSlices {
		if j > 0 {
			for range 64 {
				btcec.DoubleNonConst(&base, &base)
			}
		}
		var twice btcec.JacobianPoint
		btcec.DoubleNonConst(&base, &twice)
		jac[j*odd] = base
		for i := 1; i < odd; i++ {
			btcec.AddNonConst(&jac[j*odd+i-1], &twice, &jac[j*odd+i])
		}
	}
	// One inversion for all (Montgomery's trick):
	// Z_k^-1 = (Z_1···Z_k)^-1 · (Z_1···Z_{k-1}).
	prefix := make([]btcec.FieldVal, len(jac))
	prefix[0] = jac[0].Z
	for k := 1; k < len(jac); k++ {
		prefix[k].Mul2(&prefix[k-1], &jac[k].Z).Normalize()
	}
	var inv btcec.FieldVal
	inv.Set(&prefix[len(jac)-1]).Inverse()
	out := make([]affinePoint, len(jac))
	for k := len(jac) - 1; k >= 0; k-- {
		var zinv btcec.FieldVal
		if k > 0 {
			zinv.Mul2(&inv, &prefix[k-1])
			inv.Mul(&jac[k].Z)
		} else {
			zinv.Set(&inv)
		}
		var z2, z3 btcec.FieldVal
		z2.SquareVal(&zinv)
		z3.Mul2(&z2, &zinv)
		out[k].x.Mul2(&jac[k].X, &z2).Normalize()
		out[k].y.Mul2(&jac[k].Y, &z3).Normalize()
	}
	return out
}

// mulAdd sets result to s·G + e·P for the table's P.
func (t *keyTable) mulAdd(s, e *btcec.ModNScalar, result *btcec.JacobianPoint) {
	var ds, de [tableSlices][sliceDigits]int16
	sliceDigitsOf(s, genWidth, &ds)
	sliceDigitsOf(e, keyWidth, &de)
	gen := genTable()
	var acc btcec.JacobianPoint
	for i := sliceDigits - 1; i >= 0; i-- {
		btcec.DoubleNonConst(&acc, &acc)
		for j := range tableSlices {
			addDigit(&acc, gen[j*genOdd:(j+1)*genOdd], ds[j][i])
			addDigit(&acc, t.pts[j*keyOdd:(j+1)*keyOdd], de[j][i])
		}
	}
	*result = acc
}

// addDigit adds d·Q to acc, where odd[i] is (2i+1)·Q and d is zero or odd.
func addDigit(acc *btcec.JacobianPoint, odd []affinePoint, d int16) {
	if d == 0 {
		return
	}
	var pt btcec.JacobianPoint
	pt.Z.SetInt(1)
	if d > 0 {
		a := &odd[(d-1)/2]
		pt.X, pt.Y = a.x, a.y
	} else {
		a := &odd[(-d-1)/2]
		pt.X = a.x
		pt.Y.NegateVal(&a.y, 1).Normalize()
	}
	btcec.AddNonConst(acc, &pt, acc)
}

// sliceDigitsOf writes the width-w NAF of each 64-bit slice of k.
func sliceDigitsOf(k *btcec.ModNScalar, w uint, d *[tableSlices][sliceDigits]int16) {
	b := k.Bytes() // big-endian
	for j := range tableSlices {
		var x uint64
		for _, c := range b[32-8*(j+1) : 32-8*j] {
			x = x<<8 | uint64(c)
		}
		wnaf(x, w, d[j][:])
	}
}

// wnaf writes x in width-w non-adjacent form (2 ≤ w ≤ 15), least
// significant digit first: every non-zero digit odd and below 2^(w-1) in
// magnitude, at most one of any w adjacent ones non-zero, and
// sum(d[i]·2^i) = x. A 64-bit x can need 65 digits; d must have room.
func wnaf(x uint64, w uint, d []int16) {
	mask := uint64(1)<<w - 1
	half := int16(1) << (w - 1)
	// hi holds the carry out of x when a negative digit is taken off.
	var hi uint64
	for i := 0; x != 0 || hi != 0; i++ {
		if x&1 == 1 {
			v := int16(x & mask)
			if v >= half {
				v -= 2 * half
			}
			d[i] = v
			if v > 0 {
				x -= uint64(v)
			} else {
				var carry uint64
				x, carry = addCarry(x, uint64(-v))
				hi += carry
			}
		}
		x = x>>1 | hi<<63
		hi >>= 1
	}
}

func addCarry(a, b uint64) (uint64, uint64) {
	s := a + b
	if s < a {
		return s, 1
	}
	return s, 0
}
