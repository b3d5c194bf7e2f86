package nostr

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
)

// TestWNAF checks the digit rules and that the digits sum back to x, for
// the widths the tables use and the narrowest.
func TestWNAF(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []uint64{0, 1, 7, 8, 15, 16, 2047, 2048, 4095, 1<<63 - 1, 1 << 63, 1<<64 - 1, 0x7777777777777777, 0x8888888888888888, 0xf0f0f0f0f0f0f0f0}
	for range 2000 {
		xs = append(xs, rng.Uint64())
	}
	for _, w := range []uint{2, keyWidth, genWidth} {
		for _, x := range xs {
			var d [sliceDigits]int16
			wnaf(x, w, d[:])
			sum := new(big.Int)
			for i := len(d) - 1; i >= 0; i-- {
				sum.Lsh(sum, 1).Add(sum, big.NewInt(int64(d[i])))
			}
			last := -int(w)
			for i, v := range d {
				if v == 0 {
					continue
				}
				if v%2 == 0 || v >= 1<<(w-1) || v <= -(1<<(w-1)) {
					t.Fatalf("w=%d x=%#x: digit %d is %d", w, x, i, v)
				}
				if i-last < int(w) {
					t.Fatalf("w=%d x=%#x: non-zero digits %d and %d are closer than %d", w, x, last, i, w)
				}
				last = i
			}
			if sum.Cmp(new(big.Int).SetUint64(x)) != 0 {
				t.Fatalf("w=%d x=%#x: digits sum to %#x", w, x, sum)
			}
		}
	}
}

// TestKeyTableMulAdd holds the tables' s·G + e·P to btcec's
// ScalarBaseMultNonConst, ScalarMultNonConst and AddNonConst on random
// keys, on scalars at the edges of the 64-bit slices and of the group
// order, and on the pair that cancels (s = -e·k for P = k·G).
func TestKeyTableMulAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := btcec.S256().N
	edges := []*big.Int{
		big.NewInt(0), big.NewInt(1), big.NewInt(2), big.NewInt(15), big.NewInt(2047),
		new(big.Int).Sub(n, big.NewInt(1)),
		new(big.Int).Sub(n, big.NewInt(2)),
	}
	for _, sh := range []uint{63, 64, 127, 128, 191, 192, 255} {
		p := new(big.Int).Lsh(big.NewInt(1), sh)
		edges = append(edges, p, new(big.Int).Sub(p, big.NewInt(1)))
	}
	random := func() *big.Int {
		var b [32]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return new(big.Int).SetBytes(b[:])
	}
	scalar := func(v *big.Int) *btcec.ModNScalar {
		var c btcec.ModNScalar
		c.SetByteSlice(new(big.Int).Mod(v, n).Bytes())
		return &c
	}
	for k := range 40 {
		sk, err := btcec.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		var p btcec.JacobianPoint
		sk.PubKey().AsJacobian(&p)
		tab := newKeyTable(&p)
		var pairs [][2]*big.Int
		if k == 0 {
			for _, a := range edges {
				for _, b := range edges {
					pairs = append(pairs, [2]*big.Int{a, b})
				}
			}
		}
		for range 25 {
			pairs = append(pairs, [2]*big.Int{random(), random()})
		}
		e := random()
		kb := sk.Key.Bytes()
		cancel := new(big.Int).Mul(e, new(big.Int).SetBytes(kb[:]))
		pairs = append(pairs, [2]*big.Int{new(big.Int).Neg(cancel), e})
		for _, pr := range pairs {
			s, c := scalar(pr[0]), scalar(pr[1])
			var got, sG, eP, want btcec.JacobianPoint
			tab.mulAdd(s, c, &got)
			btcec.ScalarBaseMultNonConst(s, &sG)
			btcec.ScalarMultNonConst(c, &p, &eP)
			btcec.AddNonConst(&sG, &eP, &want)
			if !samePoint(&got, &want) {
				t.Fatalf("key %d, s=%#x e=%#x: the tables give a different point", k, pr[0], pr[1])
			}
		}
	}
}

// samePoint compares two Jacobian points as affine points.
func samePoint(a, b *btcec.JacobianPoint) bool {
	ainf := (a.X.IsZero() && a.Y.IsZero()) || a.Z.IsZero()
	binf := (b.X.IsZero() && b.Y.IsZero()) || b.Z.IsZero()
	if ainf || binf {
		return ainf == binf
	}
	x, y := *a, *b
	x.ToAffine()
	y.ToAffine()
	return x.X.Equals(&y.X) && x.Y.Equals(&y.Y)
}

// TestKeyTableRefusesForgery makes the one forgery a multiplication that
// lost its key term would let through: r = x(s·G) with any s, which
// verifies only if e·P is dropped. It must fail with and without the table,
// while the author's real signatures pass on every use.
func TestKeyTableRefusesForgery(t *testing.T) {
	sk := mustKey(t)
	v := NewVerifier(4)
	for i := range 5 {
		e := &Event{CreatedAt: int64(i), Kind: 1, Tags: Tags{}, Content: "real"}
		if err := sk.Sign(e); err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(e); err != nil {
			t.Fatalf("use %d: real signature refused: %v", i, err)
		}
		forged := *e
		var s btcec.ModNScalar
		s.SetInt(uint32(12345 + i))
		var sG btcec.JacobianPoint
		btcec.ScalarBaseMultNonConst(&s, &sG)
		sG.ToAffine()
		if sG.Y.IsOdd() {
			s.Negate()
		}
		rb := sG.X.Bytes()
		sb := s.Bytes()
		copy(forged.Sig[:32], rb[:])
		copy(forged.Sig[32:], sb[:])
		if err := v.Verify(&forged); err == nil {
			t.Fatalf("use %d: forged signature accepted", i)
		}
	}
}
