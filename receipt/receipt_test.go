package receipt

import (
	"bytes"
	"errors"
	"slices"
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
	for _, p := range SplitReport(ka.DID(), 3600, 3600, slices.Repeat([][]byte{raw}, MaxReportItems+1), nil) {
		p.Sign(ka)
		b, _ := p.Encode()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := DecodeReport(data); err == nil {
			if err := r.Verify(); err != nil {
				t.Fatal("decoded report does not verify")
			}
		}
	})
}

// TestReportPageFits: a full page of receipts carrying the largest
// figures a receipt can hold encodes under the record bound, so every
// page of any report decodes.
func TestReportPageFits(t *testing.T) {
	ka, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	full := Counts{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	side := Side{Gave: full, Received: full}
	var raws [][]byte
	for range MaxReportItems {
		kb, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		a, b := Pair(ka.DID(), kb.DID())
		prev, _ := CIDOf([]byte("prev"))
		r := New(a, b, 3600, 3600, ^uint64(0), prev, side, side)
		r.Sign(ka)
		r.Sign(kb)
		raw, _ := r.Encode()
		raws = append(raws, raw)
	}
	pages := SplitReport(ka.DID(), 3600, 3600, raws, nil)
	if len(pages) != 1 {
		t.Fatalf("%d pages for %d receipts", len(pages), len(raws))
	}
	pages[0].Page, pages[0].Pages = ^uint32(0)-1, ^uint32(0) // the largest page fields
	pages[0].Sign(ka)
	b, err := pages[0].Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > canon.MaxBytes {
		t.Fatalf("a full page is %d bytes, over the %d a record may be", len(b), canon.MaxBytes)
	}
	if _, err := DecodeReport(b); err != nil {
		t.Fatal(err)
	}
}

// TestReportPages: a report splits into pages of at most MaxReportItems,
// each verifies alone, and CheckPages takes exactly one whole report.
func TestReportPages(t *testing.T) {
	ka, kb, rs := chain(t, 1)
	raw, _ := rs[0].Encode()
	d := New(ka.DID(), kb.DID(), 7200, 3600, 0, cid.Undef, Side{}, Side{})
	d.Seq, d.Disputed = 0, true
	d.Sign(ka)
	draw, _ := d.Encode()
	receipts := make([][]byte, 2*MaxReportItems+1)
	for i := range receipts {
		receipts[i] = raw
	}
	for _, c := range []struct {
		receipts, disputed int
		pages              int
	}{{0, 0, 1}, {1, 1, 1}, {MaxReportItems, 0, 1}, {MaxReportItems, 1, 2}, {2*MaxReportItems + 1, 0, 3}} {
		pages := SplitReport(ka.DID(), 3600, 3600, receipts[:c.receipts], slices.Repeat([][]byte{draw}, c.disputed))
		if len(pages) != c.pages {
			t.Fatalf("%d+%d receipts: %d pages, want %d", c.receipts, c.disputed, len(pages), c.pages)
		}
		var got []*Report
		items := 0
		for _, p := range pages {
			p.Sign(ka)
			b, _ := p.Encode()
			dec, err := DecodeReport(b)
			if err != nil {
				t.Fatalf("%d+%d: page %d: %v", c.receipts, c.disputed, p.Page, err)
			}
			items += len(dec.Receipts) + len(dec.Disputed)
			got = append(got, dec)
		}
		if items != c.receipts+c.disputed {
			t.Fatalf("%d+%d: %d receipts in the pages", c.receipts, c.disputed, items)
		}
		if err := CheckPages(got); err != nil {
			t.Fatal(err)
		}
		if len(got) > 1 {
			if err := CheckPages(got[1:]); err == nil {
				t.Fatal("a report missing its first page was taken as whole")
			}
			if err := CheckPages(append(got[:len(got)-1:len(got)-1], got[0])); err == nil {
				t.Fatal("a report with a page twice was taken as whole")
			}
		}
	}
	// A page with more than MaxReportItems, or past its count, is refused.
	over := &Report{V: Version, Node: ka.DID(), WindowStart: 3600, WindowSecs: 3600, Receipts: receipts[:MaxReportItems+1], Disputed: [][]byte{}}
	over.Sign(ka)
	if err := over.Verify(); err == nil {
		t.Fatal("a page over MaxReportItems verified")
	}
	past := &Report{V: Version, Node: ka.DID(), WindowStart: 3600, WindowSecs: 3600, Page: 2, Pages: 2, Receipts: [][]byte{}, Disputed: [][]byte{}}
	past.Sign(ka)
	if err := past.Verify(); err == nil {
		t.Fatal("page 2 of 2 verified")
	}
}

// VerifyExcept skips the signatures only of receipts the reader holds
// already: one it does not hold is verified, and one out of place is
// refused either way.
func TestReportVerifyExcept(t *testing.T) {
	ka, _, rs := chain(t, 2)
	good, _ := rs[0].Encode()
	bad := *rs[0]
	bad.SigB = append([]byte(nil), bad.SigB...)
	bad.SigB[0] ^= 1
	badRaw, _ := bad.Encode()
	rep := &Report{V: Version, Node: ka.DID(), WindowStart: rs[0].WindowStart, WindowSecs: 3600, Receipts: [][]byte{good, badRaw}, Disputed: [][]byte{}}
	rep.Sign(ka)
	if err := rep.VerifyExcept(func(raw []byte) bool { return bytes.Equal(raw, good) }); err == nil {
		t.Fatal("a receipt not held, with a bad signature, was not verified")
	}
	if err := rep.VerifyExcept(func([]byte) bool { return true }); err != nil {
		t.Fatalf("held receipts: %v", err)
	}
	other, _ := rs[1].Encode() // another window
	rep.Receipts = [][]byte{other}
	rep.Sign(ka)
	if err := rep.VerifyExcept(func([]byte) bool { return true }); err == nil {
		t.Fatal("a held receipt of another window was taken into the report")
	}
}
