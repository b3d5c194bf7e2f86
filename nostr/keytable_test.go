package nostr

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
)

// TestWNAF4 checks the digit rules and that the digits sum back to x.
func TestWNAF4(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []uint64{0, 1, 7, 8, 15, 16, 1<<63 - 1, 1 << 63, 1<<64 - 1, 0x7777777777777777, 0x8888888888888888, 0xf0f0f0f0f0f0f0f0}
	for range 2000 {
		xs = append(xs, rng.Uint64())
	}
	for _, x := range xs {
		var d [65]int8
		wnaf4(x, d[:])
		sum := new(big.Int)
		last := -4
		for i := len(d) - 1; i >= 0; i-- {
			sum.Lsh(sum, 1).Add(sum, big.NewInt(int64(d[i])))
		}
		for i, v := range d {
			if v == 0 {
				continue
			}
			if v%2 == 0 || v > 7 || v < -7 {
				t.Fatalf("x=%#x: digit %d is %d", x, i, v)
			}
			if i-last < 4 {
				t.Fatalf("x=%#x: non-zero digits %d and %d are adjacent", x, last, i)
			}
			last = i
		}
		if sum.Cmp(new(big.Int).SetUint64(x)) != 0 {
			t.Fatalf("x=%#x: digits sum to %#x", x, sum)
		}
	}
}

// TestKeyTableMul holds the table multiplication to btcec's
// ScalarMultNonConst on random keys and on scalars at the edges of the
// 64-bit slices and of the group order.
func TestKeyTableMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := btcec.S256().N
	edges := []*big.Int{
		big.NewInt(0), big.NewInt(1), big.NewInt(2), big.NewInt(15),
		new(big.Int).Sub(n, big.NewInt(1)),
		new(big.Int).Sub(n, big.NewInt(2)),
	}
	for _, sh := range []uint{63, 64, 127, 128, 191, 192, 255} {
		p := new(big.Int).Lsh(big.NewInt(1), sh)
		edges = append(edges, p, new(big.Int).Sub(p, big.NewInt(1)))
	}
	for k := range 40 {
		sk, err := btcec.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		var p btcec.JacobianPoint
		sk.PubKey().AsJacobian(&p)
		tab := newKeyTable(&p)
		scalars := edges
		if k > 0 {
			scalars = nil
		}
		for range 25 {
			var b [32]byte
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			scalars = append(scalars, new(big.Int).SetBytes(b[:]))
		}
		for _, s := range scalars {
			var c btcec.ModNScalar
			c.SetByteSlice(new(big.Int).Mod(s, n).Bytes())
			var got, want btcec.JacobianPoint
			tab.mul(&c, &got)
			btcec.ScalarMultNonConst(&c, &p, &want)
			if !samePoint(&got, &want) {
				t.Fatalf("key %d, scalar %#x: table gives a different point", k, s)
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
