package nostr

import "github.com/btcsuite/btcd/btcec/v2"

// A keyTable lets the pure-Go check multiply an author's key by a scalar
// with half the point doublings and fewer additions than btcec's
// ScalarMultNonConst, which is three quarters of a verification.
//
// btcec starts from nothing on every call: it splits the 256-bit scalar in
// two 128-bit halves by the curve's endomorphism and walks them bit by bit
// in plain NAF (a third of the digits non-zero), so about 128 doublings and
// 85 additions. For a key it has seen before, a relay can afford to keep
// work done once: the table holds, for each of the four 64-bit slices of
// the scalar, the odd multiples 1, 3, 5, 7 of 2^(64j)·P in affine form.
// The multiplication then walks all four slices together in width-4 NAF
// (a fifth of the digits non-zero): 64 doublings and about 52 mixed
// additions. That is the fixed-base comb idea applied to a variable key
// that the Verifier keeps anyway, with the four slices' width-w NAFs
// interleaved (Hankerson, Menezes and Vanstone, Guide to Elliptic Curve
// Cryptography, §3.3: width-w NAF, fixed-base comb, interleaving).
//
// Building a table costs about three quarters of a verification (192
// doublings to reach 2^192·P, twelve additions and one field inversion
// shared by all sixteen points), so the Verifier builds one only for a key
// it is asked about a second time. It takes 16 points of 80 bytes.
//
// Nothing here depends on a secret: keys, signatures and scalars are
// public, so non-constant time is fine, as it is in btcec's NonConst
// functions this is made of.
type keyTable struct {
	// pts[j][i] is (2i+1)·2^(64j)·P, with Z = 1 and normalized.
	pts [keyTableSlices][keyTableOdd]affinePoint
}

const (
	keyTableSlices = 4                    // slices of the 256-bit scalar
	keyTableBits   = 256 / keyTableSlices // bits per slice
	keyTableOdd    = 4                    // odd multiples kept per slice: window width 4
	keyTableDigits = keyTableBits + 1     // a slice's wNAF can carry one digit out
)

// affinePoint is a normalized point with an implied Z of 1.
type affinePoint struct{ x, y btcec.FieldVal }

// newKeyTable precomputes the table for p, a point on the curve that is not
// the point at infinity (a lifted key always is).
func newKeyTable(p *btcec.JacobianPoint) *keyTable {
	var jac [keyTableSlices * keyTableOdd]btcec.JacobianPoint
	base := *p
	for j := range keyTableSlices {
		if j > 0 {
			for range keyTableBits {
				btcec.DoubleNonConst(&base, &base)
			}
		}
		var twice btcec.JacobianPoint
		btcec.DoubleNonConst(&base, &twice)
		jac[j*keyTableOdd] = base
		for i := 1; i < keyTableOdd; i++ {
			btcec.AddNonConst(&jac[j*keyTableOdd+i-1], &twice, &jac[j*keyTableOdd+i])
		}
	}
	// One inversion for all: Z_k^-1 = (Z_1···Z_k)^-1 · (Z_1···Z_{k-1}).
	// No Z is zero: each point is m·P with 0 < m ≤ 7·2^192 < n, and P has
	// order n.
	var prefix [len(jac)]btcec.FieldVal
	prefix[0] = jac[0].Z
	for k := 1; k < len(jac); k++ {
		prefix[k].Mul2(&prefix[k-1], &jac[k].Z).Normalize()
	}
	var inv btcec.FieldVal
	inv.Set(&prefix[len(jac)-1]).Inverse()
	t := new(keyTable)
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
		a := &t.pts[k/keyTableOdd][k%keyTableOdd]
		a.x.Mul2(&jac[k].X, &z2).Normalize()
		a.y.Mul2(&jac[k].Y, &z3).Normalize()
	}
	return t
}

// mul sets result to k·P for the table's P.
func (t *keyTable) mul(k *btcec.ModNScalar, result *btcec.JacobianPoint) {
	b := k.Bytes()
	var digits [keyTableSlices][keyTableDigits]int8
	const bytes = keyTableBits / 8
	for j := range keyTableSlices {
		// Slice j is bits keyTableBits·j and up; Bytes is big-endian.
		var x uint64
		for _, c := range b[32-bytes*(j+1) : 32-bytes*j] {
			x = x<<8 | uint64(c)
		}
		wnaf4(x, digits[j][:])
	}
	var acc, pt btcec.JacobianPoint
	pt.Z.SetInt(1)
	for i := keyTableDigits - 1; i >= 0; i-- {
		btcec.DoubleNonConst(&acc, &acc)
		for j := range keyTableSlices {
			d := digits[j][i]
			if d == 0 {
				continue
			}
			a := &t.pts[j][(abs8(d)-1)/2]
			pt.X = a.x
			if d > 0 {
				pt.Y = a.y
			} else {
				pt.Y.NegateVal(&a.y, 1).Normalize()
			}
			btcec.AddNonConst(&acc, &pt, &acc)
		}
	}
	*result = acc
}

// wnaf4 writes x in width-4 non-adjacent form, least significant digit
// first: digits in {0, ±1, ±3, ±5, ±7}, at most one of any four adjacent
// ones non-zero, and sum(d[i]·2^i) = x. An x of b bits can need b+1
// digits; d must have room for them.
func wnaf4(x uint64, d []int8) {
	// hi holds the carry out of x when a negative digit is taken off.
	var hi uint64
	for i := 0; x != 0 || hi != 0; i++ {
		if x&1 == 1 {
			v := int8(x & 15)
			if v >= 8 {
				v -= 16
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

func abs8(v int8) int8 {
	if v < 0 {
		return -v
	}
	return v
}
