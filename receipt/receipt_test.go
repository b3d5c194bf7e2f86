package receipt

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/canon"
)

func keys(t testing.TB) (a, b *identity.Key) {
	t.Helper()
	x, _ := identity.KeyFromSeed(bytes.Repeat([]byte{1}, 32))
	y, _ := identity.KeyFromSeed(bytes.Repeat([]byte{2}, 32))
	if x.DID() > y.DID() {
		x, y = y, x
	}
	return x, y
}

// chain makes n co-signed receipts of one pair.
func chain(t testing.TB, n int) (ka, kb *identity.Key, rs []*Receipt) {
	ka, kb = keys(t)
	prev := cid.Undef
	for i := 1; i <= n; i++ {
		r := New(ka.DID(), kb.DID(), int64(i)*3600, 3600, uint64(i), prev,
			Side{Gave: Counts{Events: uint64(i), Bytes: 100}}, Side{Received: Counts{Events: uint64(i), Bytes: 100}})
		if err := r.Sign(ka); err != nil {
			t.Fatal(err)
		}
		if err := r.Sign(kb); err != nil {
			t.Fatal(err)
		}
		prev, _ = r.CID()
		rs = append(rs, r)
	}
	return ka, kb, rs
}

func TestRoundTripAndChain(t *testing.T) {
	ka, _, rs := chain(t, 4)
	for _, r := range rs {
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := got.Verify(); err != nil {
			t.Fatal(err)
		}
		if c1, _ := got.CID(); !c1.Equals(mustCID(r)) {
			t.Fatal("CID changed across a round trip")
		}
	}
	n, err := VerifyChain(ka.DID(), rs)
	if err != nil || n != 4 {
		t.Fatalf("VerifyChain = %d, %v", n, err)
	}
}

func mustCID(r *Receipt) cid.Cid { c, _ := r.CID(); return c }

func TestChainFailures(t *testing.T) {
	ka, kb, rs := chain(t, 3)
	other, _ := identity.KeyFromSeed(bytes.Repeat([]byte{3}, 32))
	cases := []struct {
		name string
		mod  func([]*Receipt) []*Receipt
		want string
	}{
		{"gap", func(rs []*Receipt) []*Receipt { return []*Receipt{rs[0], rs[2]} }, "seq 3 where 2 was due"},
		{"not from 1", func(rs []*Receipt) []*Receipt { return rs[1:] }, "seq 2 where 1 was due"},
		{"bad prev", func(rs []*Receipt) []*Receipt {
			r := *rs[2]
			r.Prev = rs[0].Prev
			r.Prev = mustCID(rs[0]).Bytes()
			r.SigA, r.SigB = nil, nil
			r.Sign(ka)
			r.Sign(kb)
			return []*Receipt{rs[0], rs[1], &r}
		}, "prev is"},
		{"tampered", func(rs []*Receipt) []*Receipt {
			r := *rs[1]
			r.CountsA.Gave.Events = 99
			return []*Receipt{rs[0], &r, rs[2]}
		}, "signature does not verify"},
		{"one signature", func(rs []*Receipt) []*Receipt {
			r := *rs[1]
			r.SigB = nil
			return []*Receipt{rs[0], &r, rs[2]}
		}, "sig_b is missing"},
		{"stranger", func(rs []*Receipt) []*Receipt {
			r := *rs[0]
			r.A = other.DID()
			return []*Receipt{&r}
		}, "does not involve"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := VerifyChain(ka.DID(), c.mod(rs))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestSettlementMustBeNull(t *testing.T) {
	ka, kb, rs := chain(t, 1)
	t.Run("missing", func(t *testing.T) {
		type noSettlement struct {
			V           int    `cbor:"v"`
			A           string `cbor:"a"`
			B           string `cbor:"b"`
			WindowStart int64  `cbor:"window_start"`
			WindowSecs  int64  `cbor:"window_secs"`
			Seq         uint64 `cbor:"seq"`
			Prev        []byte `cbor:"prev"`
			CountsA     Side   `cbor:"counts_a"`
			CountsB     Side   `cbor:"counts_b"`
			Disputed    bool   `cbor:"disputed"`
			SigA        []byte `cbor:"sig_a,omitempty"`
			SigB        []byte `cbor:"sig_b,omitempty"`
		}
		r := rs[0]
		b, _ := canon.Marshal(noSettlement{r.V, r.A, r.B, r.WindowStart, r.WindowSecs, r.Seq, r.Prev, r.CountsA, r.CountsB, false, r.SigA, r.SigB})
		if _, err := Decode(b); !errors.Is(err, ErrSettlement) {
			t.Fatalf("Decode = %v, want ErrSettlement", err)
		}
	})
	for name, s := range map[string]canon.RawMessage{"object": {0xa0}, "zero": {0x00}, "false": {0xf4}} {
		t.Run(name, func(t *testing.T) {
			r := *rs[0]
			r.Settlement = s
			r.SigA, r.SigB = nil, nil
			// Signed by both: the settlement alone makes it invalid.
			r.Sign(ka)
			r.Sign(kb)
			b, err := canon.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(b); !errors.Is(err, ErrSettlement) {
				t.Fatalf("Decode = %v, want ErrSettlement", err)
			}
			if err := r.Verify(); !errors.Is(err, ErrSettlement) {
				t.Fatalf("Verify = %v, want ErrSettlement", err)
			}
		})
	}
}

func TestNonCanonicalRefused(t *testing.T) {
	_, _, rs := chain(t, 1)
	b, _ := rs[0].Encode()
	// The same map with a 1-byte length written in 2 bytes is the same
	// value, not the same bytes.
	long := append([]byte{0xb8, b[0] & 0x1f}, b[1:]...)
	if _, err := Decode(long); err == nil || !strings.Contains(err.Error(), "canonical") {
		t.Fatalf("Decode = %v, want a canonical-form refusal", err)
	}
}

func TestForkProof(t *testing.T) {
	ka, kb, rs := chain(t, 2)
	alt := New(ka.DID(), kb.DID(), rs[1].WindowStart, 3600, 2, mustCID(rs[0]), Side{Gave: Counts{Events: 1000}}, Side{})
	alt.Sign(ka)
	alt.Sign(kb)
	p, err := NewForkProof(rs[1], alt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Encode()
	if _, err := DecodeForkProof(b); err != nil {
		t.Fatal(err)
	}
	if _, err := NewForkProof(rs[1], rs[1]); !errors.Is(err, ErrNotFork) {
		t.Fatalf("same receipt twice: %v", err)
	}
	if _, err := NewForkProof(rs[0], alt); !errors.Is(err, ErrNotFork) {
		t.Fatalf("different seq: %v", err)
	}
	half := *alt
	half.SigB = nil
	if _, err := NewForkProof(rs[1], &half); err == nil {
		t.Fatal("a fork proof with a receipt signed by one side verified")
	}
}

func TestReport(t *testing.T) {
	ka, kb, rs := chain(t, 1)
	raw, _ := rs[0].Encode()
	d := New(ka.DID(), kb.DID(), 7200, 3600, 0, cid.Undef, Side{}, Side{})
	d.Seq, d.Disputed = 0, true
	d.Sign(ka)
	draw, _ := d.Encode()
	rep := &Report{V: Version, Node: ka.DID(), WindowStart: 3600, WindowSecs: 3600, Receipts: [][]byte{raw}, Disputed: [][]byte{draw}}
	if err := rep.Sign(ka); err != nil {
		t.Fatal(err)
	}
	b, _ := rep.Encode()
	if _, err := DecodeReport(b); err != nil {
		t.Fatal(err)
	}
	rep.WindowStart = 7200
	if err := rep.Verify(); err == nil {
		t.Fatal("a changed report verified")
	}
}

func FuzzDecode(f *testing.F) {
	_, _, rs := chain(f, 2)
	for _, r := range rs {
		b, _ := r.Encode()
		f.Add(b)
	}
	f.Add([]byte{0xa0})
	f.Add([]byte{0xf6})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes, and has a null
		// settlement.
		b, err := r.Encode()
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("decoded receipt re-encodes differently")
		}
		if string(r.Settlement) != string(canon.Null) {
			t.Fatal("decoded a receipt with a non-null settlement")
		}
		r.Verify()
	})
}

func FuzzDecodeForkProof(f *testing.F) {
	ka, kb, rs := chain(f, 2)
	alt := New(ka.DID(), kb.DID(), rs[1].WindowStart, 3600, 2, mustCID(rs[0]), Side{}, Side{})
	alt.Sign(ka)
	alt.Sign(kb)
	p, _ := NewForkProof(rs[1], alt)
	b, _ := p.Encode()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, err := DecodeForkProof(data); err == nil {
			if _, _, err := p.Verify(); err != nil {
				t.Fatal("decoded fork proof does not verify")
			}
		}
	})
}

func FuzzDecodeReport(f *testing.F) {
	ka, _, rs := chain(f, 1)
	raw, _ := rs[0].Encode()
	rep := &Report{V: Version, Node: ka.DID(), WindowStart: 3600, WindowSecs: 3600, Receipts: [][]byte{raw}, Disputed: [][]byte{}}
	rep.Sign(ka)
	b, _ := rep.Encode()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := DecodeReport(data); err == nil {
			if err := r.Verify(); err != nil {
				t.Fatal("decoded report does not verify")
			}
		}
	})
}
