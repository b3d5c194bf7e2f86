package compute

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

const testJob = "0123456789abcdef0123456789abcdef"

var okLimits = Limits{Fuel: 10_000_000, MemoryPages: 4, OutputBytes: 1024, CallDepth: 100, DeadlineMS: 5000}

func msg(t testing.TB, typ string, body any) *didcomm.Message {
	m, err := Message(typ, "", body)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseOffer(t *testing.T) {
	mod := ModuleCID([]byte("\x00asm")).String()
	for _, tc := range []struct {
		name string
		body any
		err  string
	}{
		{"ok", Offer{JobID: testJob, Module: mod, ModuleBytes: 8, Limits: okLimits, Redundancy: 3}, ""},
		{"bad job id", Offer{JobID: "x", Module: mod, ModuleBytes: 8, Limits: okLimits, Redundancy: 1}, "job_id"},
		{"bad cid", Offer{JobID: testJob, Module: "nope", ModuleBytes: 8, Limits: okLimits, Redundancy: 1}, "not a CID"},
		{"module too big", Offer{JobID: testJob, Module: mod, ModuleBytes: MaxModuleBytes + 1, Limits: okLimits, Redundancy: 1}, "module_bytes"},
		{"no redundancy", Offer{JobID: testJob, Module: mod, ModuleBytes: 8, Limits: okLimits}, "redundancy"},
		{"no fuel", Offer{JobID: testJob, Module: mod, ModuleBytes: 8, Limits: Limits{MemoryPages: 1, CallDepth: 1, DeadlineMS: 1}, Redundancy: 1}, "fuel"},
		{"long deadline", Offer{JobID: testJob, Module: mod, ModuleBytes: 8, Limits: Limits{Fuel: 1, MemoryPages: 1, CallDepth: 1, DeadlineMS: MaxDeadlineMS + 1}, Redundancy: 1}, "deadline_ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseOffer(msg(t, TypeOffer, tc.body))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var p *didcomm.Problem
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &p) || p.Code != didcomm.CodeMalformed {
				t.Fatalf("err %v, want a malformed problem naming %q", err, tc.err)
			}
		})
	}
	if _, err := ParseOffer(msg(t, TypeAccept, Accept{JobID: testJob})); err == nil {
		t.Fatal("an accept parsed as an offer")
	}
}

func TestSealRoundTrip(t *testing.T) {
	a, _ := identity.GenerateKey()
	b, _ := identity.GenerateKey()
	c, _ := identity.GenerateKey()
	sa, _ := NewSealer(a)
	sb, _ := NewSealer(b)
	sc, _ := NewSealer(c)
	secret := []byte("the input nobody else reads")
	sealed, err := sa.Seal(b.DID(), testJob, KindInput, secret)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "nobody") {
		t.Fatal("the sealed payload shows its plaintext")
	}
	got, err := sb.Open(sealed, a.DID(), testJob, KindInput, 1024)
	if err != nil || string(got) != string(secret) {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := sc.Open(sealed, a.DID(), testJob, KindInput, 1024); err == nil {
		t.Fatal("a third node opened the sealed input")
	}
	if _, err := sb.Open(sealed, c.DID(), testJob, KindInput, 1024); err == nil {
		t.Fatal("opened as if from another sender")
	}
	if _, err := sb.Open(sealed, a.DID(), testJob, KindOutput, 1024); err == nil {
		t.Fatal("an input opened as an output")
	}
	if _, err := sb.Open(sealed, a.DID(), testJob, KindInput, 4); err == nil {
		t.Fatal("opened past the size bound")
	}
}

func TestCheckModule(t *testing.T) {
	mod := []byte("\x00asm\x01\x00\x00\x00")
	if err := CheckModule(ModuleCID(mod).String(), mod); err != nil {
		t.Fatal(err)
	}
	if err := CheckModule(ModuleCID(mod).String(), append(mod, 0)); err == nil {
		t.Fatal("other bytes matched the CID")
	}
}

// FuzzParse feeds every decoder arbitrary bodies under every type.
func FuzzParse(f *testing.F) {
	mod := ModuleCID([]byte("\x00asm")).String()
	for _, b := range []any{
		Offer{JobID: testJob, Module: mod, ModuleBytes: 8, Limits: okLimits, Redundancy: 3},
		Accept{JobID: testJob, NeedModule: true},
		Decline{JobID: testJob, Code: DeclineBusy},
		Input{JobID: testJob, Module: "AGFzbQ==", Sealed: json.RawMessage(`{"protected":"x"}`)},
		Commit{JobID: testJob, Commitment: strings.Repeat("ab", 32)},
		Reveal{JobID: testJob, Commitments: []string{strings.Repeat("ab", 32)}},
		Result{JobID: testJob, Outcome: OutcomeOK, ResultHash: strings.Repeat("cd", 32), Nonce: strings.Repeat("01", 32), Sealed: json.RawMessage(`{}`)},
		Cancel{JobID: testJob, Reason: "changed my mind"},
	} {
		raw, _ := json.Marshal(b)
		f.Add(raw)
	}
	f.Add([]byte(`{"job_id":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, typ := range []string{TypeOffer, TypeAccept, TypeDecline, TypeInput, TypeCommit, TypeReveal, TypeResult, TypeCancel} {
			m := &didcomm.Message{ID: "1", Type: typ, Body: body}
			var err error
			switch typ {
			case TypeOffer:
				var o *Offer
				if o, err = ParseOffer(m); err == nil && (o.Limits.Check() != nil || o.Redundancy < 1) {
					t.Fatal("an offer outside the bounds parsed")
				}
			case TypeAccept:
				_, err = ParseAccept(m)
			case TypeDecline:
				_, err = ParseDecline(m)
			case TypeInput:
				var mod []byte
				if _, mod, err = ParseInput(m); err == nil && len(mod) > MaxModuleBytes+2 {
					t.Fatal("a module past the bound parsed")
				}
			case TypeCommit:
				_, _, err = ParseCommit(m)
			case TypeReveal:
				_, err = ParseReveal(m)
			case TypeResult:
				_, _, err = ParseResult(m)
			case TypeCancel:
				_, err = ParseCancel(m)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: refusal %v does not wrap ErrMalformed", typ, err)
			}
		}
	})
}

// FuzzOpen feeds the sealed-payload decoder arbitrary bytes.
func FuzzOpen(f *testing.F) {
	a, _ := identity.GenerateKey()
	b, _ := identity.GenerateKey()
	sa, _ := NewSealer(a)
	sb, _ := NewSealer(b)
	sealed, _ := sa.Seal(b.DID(), testJob, KindOutput, []byte("out"))
	f.Add(sealed)
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if out, err := sb.Open(data, a.DID(), testJob, KindOutput, 16); err == nil && len(out) > 16 {
			t.Fatal("opened past the bound")
		}
	})
}

func TestParseResult(t *testing.T) {
	ok := func(metered int64) Result {
		return Result{JobID: testJob, Outcome: OutcomeOK, ResultHash: strings.Repeat("cd", 32), Nonce: strings.Repeat("01", 32), Metered: metered, Sealed: json.RawMessage(`{}`)}
	}
	for _, tc := range []struct {
		name    string
		body    Result
		metered int64 // Unix seconds of the Opening's Metered, 0: zero time
		err     string
	}{
		{"metered", ok(1_800_000_000), 1_800_000_000, ""},
		{"metered absent", ok(0), 0, ""},
		{"metered negative", ok(-5), 0, "metered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, o, err := ParseResult(msg(t, TypeResult, tc.body))
			if tc.err != "" {
				var p *didcomm.Problem
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &p) || p.Code != didcomm.CodeMalformed {
					t.Fatalf("err %v, want a malformed problem naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.metered == 0 && !o.Metered.IsZero() || tc.metered != 0 && o.Metered.Unix() != tc.metered {
				t.Fatalf("metered %v, want %d", o.Metered, tc.metered)
			}
		})
	}
}
