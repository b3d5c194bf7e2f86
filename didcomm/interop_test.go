package didcomm

import (
	"encoding/json"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm/internal/nodeinterop"
	"fleetmesh.org/fleetmesh/identity"
)

type jsUnpacked struct {
	Message  json.RawMessage `json:"message"`
	Metadata struct {
		Encrypted     bool   `json:"encrypted"`
		Authenticated bool   `json:"authenticated"`
		NonRepudiable bool   `json:"non_repudiation"`
		Anonymous     bool   `json:"anonymous_sender"`
		EncryptedFrom string `json:"encrypted_from_kid"`
		SignFrom      string `json:"sign_from"`
	} `json:"metadata"`
	Error string `json:"error"`
}

// TestInteropGoToJS: Go packs, didcomm-node unpacks, with did:key on both
// sides and the DID documents exactly as identity.Resolve makes them.
func TestInteropGoToJS(t *testing.T) {
	alice, bob := newParty(t), newParty(t)
	type sent struct {
		opt    PackOptions
		msg    *Message
		packed string
	}
	var all []sent
	for _, opt := range []PackOptions{
		{Mode: ModeAuthcrypt},
		{Mode: ModeAnoncrypt},
		{Mode: ModeAnoncrypt, Enc: EncA256GCM},
		{Mode: ModeAnoncrypt, Enc: EncXC20P},
		{Mode: ModeSigned},
		{Mode: ModeAuthcrypt, Sign: true},
		{Mode: ModeAuthcrypt, ProtectSender: true},
		{Mode: ModePlaintext},
	} {
		m := testMessage(t, alice, bob)
		if opt.Mode == ModeAnoncrypt {
			m.From = ""
		}
		p, err := alice.packer().Pack(m, opt)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sent{opt, m, string(p)})
	}
	req := map[string]any{"op": "unpack", "docs": nodeinterop.Docs(t, alice.key.DID(), bob.key.DID()), "secrets": nodeinterop.Secrets(t, bob.key)}
	var msgs []string
	for _, s := range all {
		msgs = append(msgs, s.packed)
	}
	req["messages"] = msgs
	var got []jsUnpacked
	nodeinterop.Run(t, req, &got)
	if len(got) != len(all) {
		t.Fatalf("node answered %d results for %d messages", len(got), len(all))
	}
	kid, _ := identity.KeyAgreementID(alice.key.DID())
	sid, _ := identity.SigningKeyID(alice.key.DID())
	for i, s := range all {
		name := string(s.opt.Mode) + "/" + s.opt.Enc
		r := got[i]
		if r.Error != "" {
			t.Errorf("%s: didcomm-node refused: %s", name, r.Error)
			continue
		}
		var m Message
		if err := json.Unmarshal(r.Message, &m); err != nil || m.ID != s.msg.ID || !strings.Contains(string(m.Body), "hello") {
			t.Errorf("%s: didcomm-node read %s (%v)", name, r.Message, err)
		}
		md := r.Metadata
		wantAuth := s.opt.Mode == ModeAuthcrypt
		if md.Encrypted != (s.opt.Mode == ModeAnoncrypt || wantAuth) || md.Authenticated != (wantAuth || s.opt.Mode == ModeSigned || s.opt.Sign) {
			t.Errorf("%s: metadata %+v", name, md)
		}
		if wantAuth && md.EncryptedFrom != kid {
			t.Errorf("%s: sender kid %q, want %q", name, md.EncryptedFrom, kid)
		}
		if (s.opt.Mode == ModeSigned || s.opt.Sign) && (!md.NonRepudiable || md.SignFrom != sid) {
			t.Errorf("%s: signer %q nonrep=%v", name, md.SignFrom, md.NonRepudiable)
		}
	}
}

// TestInteropJSToGo: didcomm-node packs, Go unpacks.
func TestInteropJSToGo(t *testing.T) {
	alice, bob := newParty(t), newParty(t)
	modes := []Mode{ModeAuthcrypt, ModeAnoncrypt, ModeSigned, ModePlaintext}
	var reqs []map[string]any
	var sentMsgs []*Message
	for _, mode := range modes {
		m := testMessage(t, alice, bob)
		sentMsgs = append(sentMsgs, m)
		reqs = append(reqs, map[string]any{"mode": mode, "message": m})
	}
	var packed []json.RawMessage
	nodeinterop.Run(t, map[string]any{
		"op": "pack", "docs": nodeinterop.Docs(t, alice.key.DID(), bob.key.DID()), "secrets": nodeinterop.Secrets(t, alice.key), "requests": reqs,
	}, &packed)
	if len(packed) != len(modes) {
		t.Fatalf("node packed %d of %d", len(packed), len(modes))
	}
	kid, _ := identity.KeyAgreementID(alice.key.DID())
	for i, mode := range modes {
		var s string
		if err := json.Unmarshal(packed[i], &s); err != nil {
			t.Errorf("%s: didcomm-node failed: %s", mode, packed[i])
			continue
		}
		u := bob.unpacker()
		u.Replay = NewReplayGuard(DefaultReplayWindow, DefaultReplayEntries)
		got, err := u.Unpack([]byte(s))
		if err != nil {
			t.Errorf("%s: Go refused didcomm-node's message: %v\n%s", mode, err, s)
			continue
		}
		if got.Mode != mode || got.Message.ID != sentMsgs[i].ID || !strings.Contains(string(got.Message.Body), "hello") {
			t.Errorf("%s: got mode %s message %+v", mode, got.Mode, got.Message)
		}
		if mode == ModeAuthcrypt && (got.SenderKID != kid || !got.Authenticated || got.Message.From != alice.key.DID()) {
			t.Errorf("authcrypt: sender %s authenticated=%v", got.SenderKID, got.Authenticated)
		}
		if mode == ModeAnoncrypt && got.Enc != EncA256CBCHS512 {
			t.Errorf("anoncrypt: enc %s", got.Enc)
		}
		if mode == ModeSigned && (!got.NonRepudiable || len(got.SignerKIDs) != 1) {
			t.Errorf("signed: signers %v", got.SignerKIDs)
		}
	}
}
