package web

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

// party is one side of an interop test: a Go key and its seed, which the
// JS side takes as its own.
type party struct {
	key  *identity.Key
	seed string
}

func newParty(t *testing.T) party {
	t.Helper()
	seed := make([]byte, 32)
	if _, err := rand.Read(seed); err != nil {
		t.Fatal(err)
	}
	k, err := identity.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return party{key: k, seed: hex.EncodeToString(seed)}
}

func (p party) secrets(t *testing.T) *didcomm.Secrets {
	t.Helper()
	s, err := didcomm.SecretsFromKey(p.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var interopModes = []didcomm.PackOptions{
	{Mode: didcomm.ModeAuthcrypt},
	{Mode: didcomm.ModeAnoncrypt},
	{Mode: didcomm.ModeAnoncrypt, Enc: didcomm.EncA256GCM},
	{Mode: didcomm.ModeAnoncrypt, Enc: didcomm.EncXC20P},
	{Mode: didcomm.ModeSigned},
	{Mode: didcomm.ModeAuthcrypt, Sign: true},
	{Mode: didcomm.ModeAuthcrypt, ProtectSender: true},
	{Mode: didcomm.ModePlaintext},
}

func testMessage(t *testing.T, from, to party, anon bool) *didcomm.Message {
	t.Helper()
	m, err := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": "hello from " + from.key.DID()})
	if err != nil {
		t.Fatal(err)
	}
	m.To = []string{to.key.DID()}
	if !anon {
		m.From = from.key.DID()
	}
	return m
}

type jsUnpacked struct {
	Message       didcomm.Message `json:"message"`
	Mode          string          `json:"mode"`
	Authenticated bool            `json:"authenticated"`
	NonRepudiable bool            `json:"non_repudiable"`
	SenderKID     string          `json:"sender_kid"`
	SignerKIDs    []string        `json:"signer_kids"`
	Enc           string          `json:"enc"`
	Error         string          `json:"error"`
	Code          string          `json:"code"`
}

// TestDIDCommGoToJS: the Go package packs in every mode, the browser
// leaf's DIDComm unpacks, and reports what the envelopes proved as Go
// does.
func TestDIDCommGoToJS(t *testing.T) {
	alice, bob := newParty(t), newParty(t)
	packer := &didcomm.Packer{Secrets: alice.secrets(t), Resolver: didcomm.DIDKeyResolver{}}
	var sent []*didcomm.Message
	var packed []string
	for _, opt := range interopModes {
		m := testMessage(t, alice, bob, opt.Mode == didcomm.ModeAnoncrypt)
		p, err := packer.Pack(m, opt)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
		packed = append(packed, string(p))
	}
	var got []jsUnpacked
	runNode(t, "gointerop.mjs", map[string]any{"op": "unpack", "seed": bob.seed, "messages": packed}, &got)
	if len(got) != len(packed) {
		t.Fatalf("JS answered %d results for %d messages", len(got), len(packed))
	}
	kid, _ := identity.KeyAgreementID(alice.key.DID())
	sid, _ := identity.SigningKeyID(alice.key.DID())
	for i, opt := range interopModes {
		name := string(opt.Mode) + "/" + opt.Enc
		if opt.Sign {
			name += "+sign"
		}
		if opt.ProtectSender {
			name += "+protect"
		}
		r := got[i]
		if r.Error != "" {
			t.Errorf("%s: JS refused Go's message: %s", name, r.Error)
			continue
		}
		if r.Message.ID != sent[i].ID || !strings.Contains(string(r.Message.Body), "hello from") {
			t.Errorf("%s: JS read %+v", name, r.Message)
		}
		auth := opt.Mode == didcomm.ModeAuthcrypt || opt.Mode == didcomm.ModeSigned
		if r.Authenticated != auth || r.NonRepudiable != (opt.Mode == didcomm.ModeSigned || opt.Sign) {
			t.Errorf("%s: authenticated %v non-repudiable %v", name, r.Authenticated, r.NonRepudiable)
		}
		if opt.Mode == didcomm.ModeAuthcrypt && r.SenderKID != kid {
			t.Errorf("%s: sender kid %q, want %q", name, r.SenderKID, kid)
		}
		if (opt.Mode == didcomm.ModeSigned || opt.Sign) && (len(r.SignerKIDs) != 1 || r.SignerKIDs[0] != sid) {
			t.Errorf("%s: signers %v, want [%s]", name, r.SignerKIDs, sid)
		}
		wantEnc := opt.Enc
		if wantEnc == "" && (opt.Mode == didcomm.ModeAnoncrypt || opt.Mode == didcomm.ModeAuthcrypt) {
			wantEnc = didcomm.EncA256CBCHS512
		}
		if r.Enc != wantEnc {
			t.Errorf("%s: enc %q, want %q", name, r.Enc, wantEnc)
		}
	}
	// A message for someone else is refused with the code Go uses.
	var other []jsUnpacked
	runNode(t, "gointerop.mjs", map[string]any{"op": "unpack", "seed": newParty(t).seed, "messages": packed[:1]}, &other)
	if len(other) != 1 || other[0].Code != didcomm.CodeNotRecipient {
		t.Fatalf("a message for another DID: %+v, want %s", other, didcomm.CodeNotRecipient)
	}
}

// TestDIDCommJSToGo: the browser leaf's DIDComm packs in every mode, the
// Go package unpacks (with its replay guard) and finds what was sent.
func TestDIDCommJSToGo(t *testing.T) {
	alice, bob := newParty(t), newParty(t)
	type request struct {
		Message *didcomm.Message `json:"message"`
		Options map[string]any   `json:"options"`
	}
	var reqs []request
	for _, opt := range interopModes {
		o := map[string]any{"mode": string(opt.Mode)}
		if opt.Enc != "" {
			o["enc"] = opt.Enc
		}
		if opt.Sign {
			o["sign"] = true
		}
		if opt.ProtectSender {
			o["protectSender"] = true
		}
		reqs = append(reqs, request{testMessage(t, alice, bob, opt.Mode == didcomm.ModeAnoncrypt), o})
	}
	var packed []json.RawMessage
	runNode(t, "gointerop.mjs", map[string]any{"op": "pack", "seed": alice.seed, "requests": reqs}, &packed)
	if len(packed) != len(reqs) {
		t.Fatalf("JS packed %d of %d", len(packed), len(reqs))
	}
	u := &didcomm.Unpacker{Secrets: bob.secrets(t), Resolver: didcomm.DIDKeyResolver{}, Replay: didcomm.NewReplayGuard(didcomm.DefaultReplayWindow, didcomm.DefaultReplayEntries)}
	kid, _ := identity.KeyAgreementID(alice.key.DID())
	for i, opt := range interopModes {
		name := string(opt.Mode) + "/" + opt.Enc
		var s string
		if err := json.Unmarshal(packed[i], &s); err != nil {
			t.Errorf("%s: JS failed: %s", name, packed[i])
			continue
		}
		got, err := u.Unpack([]byte(s))
		if err != nil {
			t.Errorf("%s: Go refused JS's message: %v\n%s", name, err, s)
			continue
		}
		if got.Message.ID != reqs[i].Message.ID || !strings.Contains(string(got.Message.Body), "hello from") {
			t.Errorf("%s: Go read %+v", name, got.Message)
		}
		wantMode := opt.Mode
		if opt.ProtectSender {
			wantMode = didcomm.ModeAnoncrypt
		}
		if got.Mode != wantMode {
			t.Errorf("%s: mode %s", name, got.Mode)
		}
		if opt.Mode == didcomm.ModeAuthcrypt && (got.SenderKID != kid || !got.Authenticated || got.Message.From != alice.key.DID()) {
			t.Errorf("%s: sender %s authenticated %v", name, got.SenderKID, got.Authenticated)
		}
		if (opt.Mode == didcomm.ModeSigned || opt.Sign) && (!got.NonRepudiable || len(got.SignerKIDs) != 1) {
			t.Errorf("%s: signers %v", name, got.SignerKIDs)
		}
		if opt.Enc != "" && got.Enc != opt.Enc {
			t.Errorf("%s: enc %s", name, got.Enc)
		}
	}
	// The same messages again are replays to Go.
	var s string
	if err := json.Unmarshal(packed[0], &s); err == nil {
		if _, err := u.Unpack([]byte(s)); err == nil || !strings.Contains(err.Error(), didcomm.CodeReplay) {
			t.Fatalf("replayed JS message: %v", err)
		}
	}
	// JS derives the same DID and key ids from the seed as Go.
	var ids struct {
		DID          string `json:"did"`
		SigningKID   string `json:"signing_kid"`
		AgreementKID string `json:"agreement_kid"`
	}
	runNode(t, "gointerop.mjs", map[string]any{"op": "did", "seed": alice.seed}, &ids)
	sid, _ := identity.SigningKeyID(alice.key.DID())
	if ids.DID != alice.key.DID() || ids.SigningKID != sid || ids.AgreementKID != kid {
		t.Fatalf("JS ids %+v, Go %s %s %s", ids, alice.key.DID(), sid, kid)
	}
}
