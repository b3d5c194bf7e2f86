package didcomm

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// nodeScript runs interop/didcomm/interop.mjs (didcomm-node 0.4.1) with one
// JSON request. CI always installs interop/node_modules, so a missing one
// fails the test rather than skipping it.
func nodeScript(t testing.TB, req any, out any) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "interop"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "didcomm-node")); err != nil {
		t.Fatalf("interop/node_modules/didcomm-node is missing: run `cd interop && npm ci` (%v)", err)
	}
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("didcomm", "interop.mjs"))
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node interop.mjs: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node output %q: %v", stdout.String(), err)
	}
}

// jsSecrets are a node key's private keys in the shape didcomm-node's
// secrets resolver takes.
func jsSecrets(t testing.TB, k *identity.Key) []map[string]any {
	t.Helper()
	sid, _ := identity.SigningKeyID(k.DID())
	kid, _ := identity.KeyAgreementID(k.DID())
	xpub, err := identity.X25519PublicFromEd25519(k.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return []map[string]any{
		{"id": sid, "type": "JsonWebKey2020", "privateKeyJwk": map[string]string{
			"kty": "OKP", "crv": "Ed25519", "x": b64.EncodeToString(k.PublicKey()), "d": b64.EncodeToString(k.PrivateKey().Seed())}},
		{"id": kid, "type": "JsonWebKey2020", "privateKeyJwk": map[string]string{
			"kty": "OKP", "crv": "X25519", "x": b64.EncodeToString(xpub), "d": b64.EncodeToString(k.X25519Private())}},
	}
}

func jsDocs(t testing.TB, dids ...string) []*identity.Document {
	t.Helper()
	var out []*identity.Document
	for _, d := range dids {
		doc, err := identity.Resolve(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, doc)
	}
	return out
}

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
	req := map[string]any{"op": "unpack", "docs": jsDocs(t, alice.key.DID(), bob.key.DID()), "secrets": jsSecrets(t, bob.key)}
	var msgs []string
	for _, s := range all {
		msgs = append(msgs, s.packed)
	}
	req["messages"] = msgs
	var got []jsUnpacked
	nodeScript(t, req, &got)
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
	nodeScript(t, map[string]any{
		"op": "pack", "docs": jsDocs(t, alice.key.DID(), bob.key.DID()), "secrets": jsSecrets(t, alice.key), "requests": reqs,
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
