package web

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/ipfs/go-cid"

	"fleetmesh.org/fleetmesh/didcomm/oob"
	"fleetmesh.org/fleetmesh/invite"
	"fleetmesh.org/fleetmesh/receipt"
)

// TestReceiptInterop: a receipt the Go package made and signed as one
// side is decoded by the browser leaf, which checks the Go signature,
// shows it as `fleetmesh receipts --json` does (same CID) and signs it as
// the other side; Go verifies both signatures of the bytes it gets back,
// so the canonical CBOR, CID and signing bytes agree. A disputed receipt
// the browser leaf records verifies in Go. A receipt Go signed and then
// changed is refused.
func TestReceiptInterop(t *testing.T) {
	goSide, jsSide := newParty(t), newParty(t)
	a, b := receipt.Pair(goSide.key.DID(), jsSide.key.DID())
	prev, err := receipt.CIDOf([]byte("the receipt before"))
	if err != nil {
		t.Fatal(err)
	}
	side := func(n uint64) receipt.Side {
		return receipt.Side{Gave: receipt.Counts{Events: n, Bytes: n * 300, MediationMessages: 70000 + n}, Received: receipt.Counts{Events: 2 * n, Bytes: 1 << 33, CircuitSeconds: 24}}
	}
	for _, tc := range []struct {
		name string
		seq  uint64
		prev cid.Cid
	}{{"first", 1, cid.Undef}, {"chained", 7, prev}} {
		t.Run(tc.name, func(t *testing.T) {
			r := receipt.New(a, b, 1_700_000_000-1_700_000_000%3600, 3600, tc.seq, tc.prev, side(3), side(250))
			if err := r.Sign(goSide.key); err != nil {
				t.Fatal(err)
			}
			raw, err := r.Encode()
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				JSON    receipt.JSON `json:"json"`
				Receipt []byte       `json:"receipt"`
				Error   string       `json:"error"`
			}
			runNode(t, "gointerop.mjs", map[string]any{"op": "countersign", "seed": jsSide.seed, "receipt": raw}, &got)
			if got.Error != "" {
				t.Fatalf("JS refused Go's receipt: %s", got.Error)
			}
			want, err := r.ToJSON()
			if err != nil {
				t.Fatal(err)
			}
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(got.JSON)
			if string(wj) != string(gj) {
				t.Fatalf("JS shows\n%s\nGo shows\n%s", gj, wj)
			}
			both, err := receipt.Decode(got.Receipt)
			if err != nil {
				t.Fatalf("Go refused JS's countersigned receipt: %v", err)
			}
			if err := both.Verify(); err != nil {
				t.Fatalf("countersigned receipt: %v", err)
			}
			c1, _ := both.CID()
			c0, _ := r.CID()
			if !c1.Equals(c0) {
				t.Fatalf("CID changed from %s to %s", c0, c1)
			}
		})
	}
	// Go changes a figure after signing: JS refuses the signature.
	r := receipt.New(a, b, 0, 60, 1, cid.Undef, side(1), side(2))
	if err := r.Sign(goSide.key); err != nil {
		t.Fatal(err)
	}
	r.CountsA.Gave.Events++
	raw, _ := r.Encode()
	var refused struct {
		Error string `json:"error"`
	}
	runNode(t, "gointerop.mjs", map[string]any{"op": "countersign", "seed": jsSide.seed, "receipt": raw}, &refused)
	if !strings.Contains(refused.Error, "does not verify") {
		t.Fatalf("JS on a changed receipt: %q", refused.Error)
	}
	// A disputed receipt recorded by the browser leaf.
	var disputed struct {
		Receipt []byte `json:"receipt"`
	}
	runNode(t, "gointerop.mjs", map[string]any{"op": "disputed", "seed": jsSide.seed, "peer": goSide.key.DID(), "window_start": 7200, "window_secs": 3600, "mine": side(5)}, &disputed)
	d, err := receipt.Decode(disputed.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(); err != nil || !d.Disputed || d.Side(jsSide.key.DID()) != side(5) || d.Side(goSide.key.DID()) != (receipt.Side{}) {
		t.Fatalf("JS's disputed receipt: %v %+v", err, d)
	}
}

// TestInvitationInterop: the browser leaf reads the join code and the
// out-of-band invitation Go makes, and refuses a mistyped code and one
// changed after signing, as Go does.
func TestInvitationInterop(t *testing.T) {
	node := newParty(t)
	endpoint := "http://192.0.2.7:7447/didcomm"
	code, err := invite.New(node.key, []string{"/ip4/192.0.2.7/tcp/4001", "/ip4/192.0.2.7/udp/4001/quic-v1"}, endpoint, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := oob.New(node.key.DID(), oob.GoalMediate, "mediation", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	oobURL, err := oob.URL(endpoint, inv)
	if err != nil {
		t.Fatal(err)
	}
	oobJSON, _ := json.Marshal(inv)
	// The code with its endpoint changed after signing, re-encoded with a
	// valid checksum: only the signature tells.
	_, data, err := bech32.DecodeNoLimit(code)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bech32.ConvertBits(data, 5, 8, false)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, []byte("192.0.2.7:7447"))
	if at < 0 {
		t.Fatal("the endpoint is not in the code")
	}
	raw[at+8] = '9' // 192.0.2.9
	changed, err := bech32.EncodeFromBase256(invite.HRP, raw)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, text, wantErr string
	}{
		{"join code", code, ""},
		{"join link, upper case", strings.ToUpper(invite.Link(code)), ""},
		{"oob URL", oobURL, ""},
		{"oob JSON", string(oobJSON), ""},
		{"typo", code[:20] + flip(code[20]) + code[21:], "not bech32"},
		{"endpoint changed after signing", changed, "signature does not verify"},
		{"not an invitation", "https://example.org/", "no _oob parameter"},
	}
	var texts []string
	for _, tc := range cases {
		texts = append(texts, tc.text)
	}
	var answers []struct {
		DID      string `json:"did"`
		Endpoint string `json:"endpoint"`
		Error    string `json:"error"`
	}
	runNode(t, "gointerop.mjs", map[string]any{"op": "invitations", "texts": texts}, &answers)
	if len(answers) != len(cases) {
		t.Fatalf("JS answered %d of %d", len(answers), len(cases))
	}
	for i, tc := range cases {
		got := answers[i]
		if tc.wantErr != "" {
			if !strings.Contains(got.Error, tc.wantErr) {
				t.Errorf("%s: error %q, want %q", tc.name, got.Error, tc.wantErr)
			}
			if _, err := invite.Parse(tc.text, time.Now()); tc.name != "not an invitation" && err == nil {
				t.Errorf("%s: Go accepts what JS refuses", tc.name)
			}
			continue
		}
		if got.Error != "" || got.DID != node.key.DID() || got.Endpoint != endpoint {
			t.Errorf("%s: JS read %+v, want %s at %s", tc.name, got, node.key.DID(), endpoint)
		}
	}
}

func flip(c byte) string {
	if c == 'q' {
		return "p"
	}
	return "q"
}
