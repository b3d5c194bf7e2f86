package standing

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/canon"
	"fleetmesh.org/fleetmesh/receipt"
)

// keys makes n keys from fixed seeds.
func keys(t testing.TB, n int) []*identity.Key {
	out := make([]*identity.Key, n)
	for i := range out {
		k, err := identity.KeyFromSeed(bytes.Repeat([]byte{byte(i + 1)}, 32))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = k
	}
	return out
}

// served is a receipt of window w in which x gave y n bytes and y gave x
// m bytes, signed by the keys given.
func served(t testing.TB, x, y *identity.Key, w int64, seq uint64, n, m uint64, signers ...*identity.Key) *receipt.Receipt {
	a, b := x, y
	if a.DID() > b.DID() {
		a, b, n, m = b, a, m, n
	}
	ca := receipt.Side{Gave: receipt.Counts{Events: 1, Bytes: n}, Received: receipt.Counts{Events: 1, Bytes: m}}
	cb := receipt.Side{Gave: receipt.Counts{Events: 1, Bytes: m}, Received: receipt.Counts{Events: 1, Bytes: n}}
	prev := cid.Undef
	if seq > 1 {
		prev, _ = receipt.CIDOf([]byte{byte(seq)})
	}
	r := receipt.New(a.DID(), b.DID(), w, 3600, seq, prev, ca, cb)
	if len(signers) == 0 {
		signers = []*identity.Key{a, b}
	}
	for _, k := range signers {
		if err := r.Sign(k); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func testView(t testing.TB, self string) *View {
	cfg := DefaultConfig()
	cfg.Walks = 20_000
	v, err := NewView(self, cfg, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestViewEvidence: what counts and what does not, one row each.
func TestViewEvidence(t *testing.T) {
	k := keys(t, 6)
	self, a, b, c, d, e := k[0], k[1], k[2], k[3], k[4], k[5]
	const w0 = 1_764_900_000 / 3600 * 3600
	base := func(t *testing.T) *View {
		v := testView(t, self.DID())
		for i, x := range []*identity.Key{a, b} {
			if err := v.AddReceipt(served(t, self, x, w0, 1, 10_000, 10_000)); err != nil {
				t.Fatalf("receipt %d: %v", i, err)
			}
		}
		if err := v.AddReceipt(served(t, a, c, w0, 1, 5_000, 5_000)); err != nil {
			t.Fatal(err)
		}
		if err := v.AddReceipt(served(t, b, c, w0, 1, 5_000, 5_000)); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, v *View) error
		// wantErr is a substring of AddReceipt's error; check the view after.
		wantErr string
		check   func(t *testing.T, v *View)
	}{
		{name: "co-signed receipts give standing, direct and two hops away",
			check: func(t *testing.T, v *View) {
				for _, x := range []*identity.Key{a, b, c} {
					if v.Of(x.DID()) <= 0 {
						t.Fatalf("%s has no standing", x.DID())
					}
				}
				es := v.Entries(c.DID())
				if len(es) != 1 || es[0].VerifiedWindows != 1 || es[0].Counterparties != 2 || es[0].TrustedCounterparties != 2 {
					t.Fatalf("c's reasons: %+v", es)
				}
			}},
		{name: "a receipt signed by one side only is refused",
			do:      func(t *testing.T, v *View) error { return v.AddReceipt(served(t, a, d, w0, 1, 9e9, 9e9, a)) },
			wantErr: "sig_",
			check: func(t *testing.T, v *View) {
				if v.Of(d.DID()) != 0 {
					t.Fatal("half-signed receipt counted")
				}
			}},
		{name: "a receipt with a non-null settlement never counts",
			do: func(t *testing.T, v *View) error {
				r := served(t, a, d, w0, 1, 9e9, 9e9)
				r.Settlement = canon.RawMessage{0x01}
				return v.AddReceipt(r)
			},
			wantErr: "settlement",
			check: func(t *testing.T, v *View) {
				if v.Of(d.DID()) != 0 {
					t.Fatal("settled receipt counted")
				}
			}},
		{name: "a ring of fresh identities co-signing each other gains nothing",
			do: func(t *testing.T, v *View) error {
				for _, r := range []*receipt.Receipt{served(t, d, e, w0, 1, 9e9, 9e9), served(t, d, e, w0+3600, 2, 9e9, 9e9)} {
					if err := v.AddReceipt(r); err != nil {
						return err
					}
				}
				return nil
			},
			check: func(t *testing.T, v *View) {
				if v.Of(d.DID()) != 0 || v.Of(e.DID()) != 0 {
					t.Fatalf("ring standing %v %v", v.Of(d.DID()), v.Of(e.DID()))
				}
			}},
		{name: "a window this node reported disputed walls its counterparty",
			do: func(t *testing.T, v *View) error {
				r := receipt.New(min(self.DID(), a.DID()), max(self.DID(), a.DID()), w0+3600, 3600, 0, cid.Undef, receipt.Side{}, receipt.Side{})
				r.Disputed = true
				if err := r.Sign(self); err != nil {
					t.Fatal(err)
				}
				return v.AddReceipt(r)
			},
			check: func(t *testing.T, v *View) {
				es := v.Entries(a.DID())
				if v.Of(a.DID()) != 0 || !es[0].Wall || es[0].Disputes != 1 {
					t.Fatalf("disputed counterparty: %+v", es)
				}
				if v.Of(c.DID()) <= 0 {
					t.Fatal("c, also reached through b, lost all standing to a's wall")
				}
			}},
		{name: "another node's dispute is not evidence here",
			do: func(t *testing.T, v *View) error {
				r := receipt.New(min(b.DID(), a.DID()), max(b.DID(), a.DID()), w0+3600, 3600, 0, cid.Undef, receipt.Side{}, receipt.Side{})
				r.Disputed = true
				if err := r.Sign(b); err != nil {
					t.Fatal(err)
				}
				return v.AddReceipt(r)
			},
			check: func(t *testing.T, v *View) {
				if v.Of(a.DID()) <= 0 {
					t.Fatal("b's word walled a")
				}
			}},
		{name: "a fork proof zeroes both of its signers",
			do: func(t *testing.T, v *View) error {
				p, err := receipt.NewForkProof(served(t, a, c, w0, 1, 5_000, 5_000), served(t, a, c, w0, 1, 6_000, 5_000))
				if err != nil {
					t.Fatal(err)
				}
				return v.AddForkProof(p)
			},
			check: func(t *testing.T, v *View) {
				if v.Of(a.DID()) != 0 || v.Of(c.DID()) != 0 {
					t.Fatal("forkers keep standing")
				}
				if v.Of(b.DID()) <= 0 {
					t.Fatal("b lost its standing to a fork it was not part of")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := base(t)
			v.Recompute(time.Unix(w0, 0))
			var err error
			if tc.do != nil {
				err = tc.do(t, v)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			tc.check(t, v)
		})
	}
}

// TestConfigCheck names the key of each bad setting.
func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Alpha = 1 }, "alpha"},
		{func(c *Config) { c.Beta = -1 }, "beta"},
		{func(c *Config) { c.Walks = 0 }, "walks"},
		{func(c *Config) { c.MaxSteps = 0 }, "max_steps"},
		{func(c *Config) { c.Epoch.Duration = time.Millisecond }, "epoch"},
		{func(c *Config) { c.EpochDecay = 0 }, "epoch_decay"},
		{func(c *Config) { c.MinUnits = -1 }, "min_units"},
		{func(c *Config) { c.DisputeEpochs = -1 }, "dispute_epochs"},
		{func(c *Config) { c.Recompute.Duration = 0 }, "recompute"},
		{func(c *Config) { c.Trusted = 2 }, "trusted"},
		{func(c *Config) { c.AnchorWindows = -1 }, "anchor_windows"},
	} {
		c := DefaultConfig()
		tc.set(&c)
		if err := c.Check(); err == nil || !strings.HasPrefix(err.Error(), tc.want+" ") {
			t.Errorf("%s: %v", tc.want, err)
		}
	}
	c := DefaultConfig()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestLeafEarnsStanding: a phone that served only its home for a week of
// hourly windows has standing at another node holding the home's
// receipts, taken through its home: at most beta of the home's own.
func TestLeafEarnsStanding(t *testing.T) {
	k := keys(t, 4)
	self, home, other, phone := k[0], k[1], k[2], k[3]
	const w0 = 1_764_900_000 / 3600 * 3600
	v := testView(t, self.DID())
	add := func(r *receipt.Receipt) {
		if err := v.AddReceipt(r); err != nil {
			t.Fatal(err)
		}
	}
	add(served(t, self, home, w0, 1, 50_000, 50_000))
	add(served(t, self, other, w0, 1, 50_000, 50_000))
	add(served(t, home, other, w0, 1, 50_000, 50_000))
	v.Recompute(time.Unix(w0, 0))
	if v.Of(phone.DID()) != 0 {
		t.Fatal("the phone has standing before it served anyone")
	}
	for h := range int64(7 * 24) {
		add(served(t, phone, home, w0+h*3600, uint64(h+1), 20_000, 1_000))
	}
	es := v.Entries(phone.DID())
	st, hs := v.Of(phone.DID()), v.Of(home.DID())
	t.Logf("phone %.5f (home %.5f, %d verified windows)", st, hs, es[0].VerifiedWindows)
	if st <= 0 || es[0].VerifiedWindows != 7*24 {
		t.Fatalf("the phone has standing %v after a week of windows: %+v", st, es)
	}
	if st > v.Config().Beta*hs*1.0001 {
		t.Fatalf("the phone's standing %v is above beta x its home's %v", st, hs)
	}
}

// TestScoresWithANodeNotYetScored: a receipt that records no service
// adds its counterparty to the view without making the scores stale;
// Scores, read after it, gives that node 0 (as Of does) rather than
// reading past the scores of the nodes scored last. A node crashed there
// (index out of range in Scores) in e2e.TestAccountingKillAtWindowClose,
// whose windows carry receipts with no bytes.
func TestScoresWithANodeNotYetScored(t *testing.T) {
	k := keys(t, 3)
	self, a, b := k[0], k[1], k[2]
	const w0 = 1_764_900_000 / 3600 * 3600
	v := testView(t, self.DID())
	if err := v.AddReceipt(served(t, self, a, w0, 1, 10_000, 10_000)); err != nil {
		t.Fatal(err)
	}
	before := v.Scores()
	if err := v.AddReceipt(served(t, self, b, w0, 1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	got := v.Scores()
	if s, ok := got[b.DID()]; !ok || s != 0 {
		t.Fatalf("scores %v: want b listed with 0 (a receipt without service)", got)
	}
	if got[a.DID()] != before[a.DID()] || got[a.DID()] != v.Of(a.DID()) {
		t.Fatalf("scores %v: a's standing is not %v as before, nor Of's %v", got, before[a.DID()], v.Of(a.DID()))
	}
}
