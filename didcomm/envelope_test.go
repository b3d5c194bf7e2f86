package didcomm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

type party struct {
	key     *identity.Key
	secrets *Secrets
}

func newParty(t testing.TB) party {
	t.Helper()
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := SecretsFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return party{key: k, secrets: s}
}

func (p party) packer() *Packer { return &Packer{Secrets: p.secrets, Resolver: DIDKeyResolver{}} }
func (p party) unpacker() *Unpacker {
	return &Unpacker{Secrets: p.secrets, Resolver: DIDKeyResolver{}}
}

func testMessage(t testing.TB, from, to party) *Message {
	t.Helper()
	m, err := NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	m.From = from.secrets.DID
	m.To = []string{to.secrets.DID}
	return m
}

func TestRoundTrip(t *testing.T) {
	alice, bob := newParty(t), newParty(t)
	for _, tc := range []struct {
		name          string
		opt           PackOptions
		encrypted     bool
		authenticated bool
		nonRep        bool
		enc           string
		desc          string
	}{
		{"plaintext", PackOptions{Mode: ModePlaintext}, false, false, false, "", "plaintext"},
		{"signed", PackOptions{Mode: ModeSigned}, false, true, true, "", "signed"},
		{"anoncrypt cbc", PackOptions{Mode: ModeAnoncrypt}, true, false, false, EncA256CBCHS512, "anoncrypt"},
		{"anoncrypt gcm", PackOptions{Mode: ModeAnoncrypt, Enc: EncA256GCM}, true, false, false, EncA256GCM, "anoncrypt"},
		{"anoncrypt xc20p", PackOptions{Mode: ModeAnoncrypt, Enc: EncXC20P}, true, false, false, EncXC20P, "anoncrypt"},
		{"anoncrypt signed", PackOptions{Mode: ModeAnoncrypt, Sign: true}, true, true, true, EncA256CBCHS512, "anoncrypt(signed)"},
		{"authcrypt", PackOptions{Mode: ModeAuthcrypt}, true, true, false, EncA256CBCHS512, "authcrypt"},
		{"authcrypt signed", PackOptions{Mode: ModeAuthcrypt, Sign: true}, true, true, true, EncA256CBCHS512, "authcrypt(signed)"},
		{"authcrypt protect sender", PackOptions{Mode: ModeAuthcrypt, ProtectSender: true}, true, true, false, EncA256CBCHS512, "anoncrypt(authcrypt)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMessage(t, alice, bob)
			if tc.opt.Mode == ModeAnoncrypt && !tc.opt.Sign {
				m.From = "" // an anonymous sender does not claim a DID
			}
			packed, err := alice.packer().Pack(m, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if tc.encrypted && bytes.Contains(packed, []byte("hello")) {
				t.Fatal("encrypted message shows its body")
			}
			if tc.opt.ProtectSender && bytes.Contains(packed, []byte("skid")) {
				t.Fatal("protected sender still shows skid")
			}
			got, err := bob.unpacker().Unpack(packed)
			if err != nil {
				t.Fatal(err)
			}
			if got.Message.ID != m.ID || !strings.Contains(string(got.Message.Body), "hello") {
				t.Fatalf("got %+v", got.Message)
			}
			if got.Encrypted != tc.encrypted || got.Authenticated != tc.authenticated || got.NonRepudiable != tc.nonRep || got.Enc != tc.enc {
				t.Fatalf("encrypted=%v authenticated=%v nonrep=%v enc=%s", got.Encrypted, got.Authenticated, got.NonRepudiable, got.Enc)
			}
			if got.String() != tc.desc {
				t.Fatalf("String() = %s, want %s", got, tc.desc)
			}
			if tc.opt.Mode == ModeAuthcrypt {
				kid, _ := identity.KeyAgreementID(alice.secrets.DID)
				if got.SenderKID != kid {
					t.Fatalf("sender kid %s, want %s", got.SenderKID, kid)
				}
			}
			// A third party cannot open what was encrypted to Bob.
			if tc.encrypted {
				if _, err := newParty(t).unpacker().Unpack(packed); problemCode(err) != CodeNotRecipient {
					t.Fatalf("stranger unpacked it: %v", err)
				}
			}
		})
	}
}

func TestMultipleRecipients(t *testing.T) {
	alice, bob, carol := newParty(t), newParty(t), newParty(t)
	m := testMessage(t, alice, bob)
	m.To = append(m.To, carol.secrets.DID)
	packed, err := alice.packer().Pack(m, PackOptions{Mode: ModeAuthcrypt})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []party{bob, carol} {
		if _, err := p.unpacker().Unpack(packed); err != nil {
			t.Fatal(err)
		}
	}
	var j jweJSON
	if err := json.Unmarshal(packed, &j); err != nil || len(j.Recipients) != 2 {
		t.Fatalf("recipients: %v %d", err, len(j.Recipients))
	}
}

// forge packs a message whose from is not the sender, bypassing Pack's
// own check, to prove the receiver refuses it.
func forgeAuthcrypt(t *testing.T, sender party, m *Message) []byte {
	t.Helper()
	plain, _ := json.Marshal(m)
	p := sender.packer()
	keys, err := p.recipientKeys(m.To, &sender.secrets.Agreement[0])
	if err != nil {
		t.Fatal(err)
	}
	out, err := encrypt(plain, keys, &sender.secrets.Agreement[0], EncA256CBCHS512, cryptoRand{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReceiverRules(t *testing.T) {
	alice, bob, mallory := newParty(t), newParty(t), newParty(t)
	now := time.Now()

	claimsAlice := testMessage(t, alice, bob)
	forgedFrom := forgeAuthcrypt(t, mallory, claimsAlice)

	signedByMallory := func() []byte {
		m := testMessage(t, alice, bob)
		plain, _ := json.Marshal(m)
		out, err := sign(plain, mallory.secrets.Signing)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}()

	// Bob gets a copy whose plaintext names only Carol.
	onlyCarol := testMessage(t, alice, bob)
	onlyCarol.To = []string{newParty(t).secrets.DID}
	plainOnlyCarol, _ := json.Marshal(onlyCarol)
	bobKeys, _ := alice.packer().recipientKeys([]string{bob.secrets.DID}, &alice.secrets.Agreement[0])
	misaddressed, _ := encrypt(plainOnlyCarol, bobKeys, &alice.secrets.Agreement[0], EncA256CBCHS512, cryptoRand{})

	expired := testMessage(t, alice, bob)
	expired.ExpiresTime = now.Add(-time.Minute).Unix()
	packedExpired, _ := alice.packer().Pack(expired, PackOptions{Mode: ModeAuthcrypt})

	future := testMessage(t, alice, bob)
	future.CreatedTime = now.Add(time.Hour).Unix()
	packedFuture, _ := alice.packer().Pack(future, PackOptions{Mode: ModeAuthcrypt})

	stale := testMessage(t, alice, bob)
	stale.CreatedTime = now.Add(-2 * DefaultReplayWindow).Unix()
	packedStale, _ := alice.packer().Pack(stale, PackOptions{Mode: ModeAuthcrypt})

	ok := testMessage(t, alice, bob)
	packedOK, _ := alice.packer().Pack(ok, PackOptions{Mode: ModeAuthcrypt})

	tampered := bytes.Replace(packedOK, []byte(`"tag":"`), []byte(`"tag":"A`), 1)

	guard := NewReplayGuard(DefaultReplayWindow, 10)
	u := bob.unpacker()
	u.Replay = guard
	if _, err := u.Unpack(packedOK); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		packed []byte
		limits Limits
		code   string
	}{
		{"from is not the authcrypt sender", forgedFrom, Limits{}, CodeSenderMismatch},
		{"from is not the signer", signedByMallory, Limits{}, CodeSenderMismatch},
		{"to does not name the recipient", misaddressed, Limits{}, CodeNotRecipient},
		{"expired", packedExpired, Limits{}, CodeExpired},
		{"created in the future", packedFuture, Limits{}, CodeExpired},
		{"older than the replay window", packedStale, Limits{}, CodeExpired},
		{"replayed", packedOK, Limits{}, CodeReplay},
		{"tampered tag", tampered, Limits{}, CodeCrypto},
		{"too big", packedOK, Limits{MaxMessageBytes: 100, MaxRecipients: 1, MaxSignatures: 1, MaxNesting: 1}, CodeTooBig},
		{"not JSON", []byte("hello"), Limits{}, CodeMalformed},
		{"no type", []byte(`{"id":"1","body":{}}`), Limits{}, CodeMalformed},
		{"plaintext without id", []byte(`{"type":"x","body":{}}`), Limits{}, CodeMalformed},
		{"body not an object", []byte(`{"id":"1","type":"x","body":[]}`), Limits{}, CodeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u.Limits = tc.limits
			_, err := u.Unpack(tc.packed)
			if problemCode(err) != tc.code {
				t.Fatalf("got %v, want code %s", err, tc.code)
			}
		})
	}
}

func TestPackRefusals(t *testing.T) {
	alice, bob := newParty(t), newParty(t)
	m := testMessage(t, alice, bob)
	m.From = bob.secrets.DID
	if _, err := alice.packer().Pack(m, PackOptions{Mode: ModeAuthcrypt}); err == nil {
		t.Fatal("packed a message claiming another sender")
	}
	m = testMessage(t, alice, bob)
	m.To = nil
	if _, err := alice.packer().Pack(m, PackOptions{Mode: ModeAnoncrypt}); err == nil {
		t.Fatal("encrypted to nobody")
	}
	m = testMessage(t, alice, bob)
	m.To = []string{"did:web:example.org"}
	if _, err := alice.packer().Pack(m, PackOptions{Mode: ModeAnoncrypt}); err == nil {
		t.Fatal("encrypted to an unresolvable DID")
	}
	if _, err := ParseMode("loud"); err == nil {
		t.Fatal("parsed an unknown mode")
	}
}

func TestReplayGuardBound(t *testing.T) {
	g := NewReplayGuard(time.Hour, 3)
	now := time.Now()
	for i := 0; i < 10; i++ {
		if err := g.check("s", string(rune('a'+i)), now.Unix(), now); err != nil {
			t.Fatal(err)
		}
	}
	if len(g.seen) > 3 || len(g.order) > 3 {
		t.Fatalf("guard holds %d ids, bound is 3", len(g.seen))
	}
	if err := g.check("s", "j", now.Unix(), now); problemCode(err) != CodeReplay {
		t.Fatalf("recent id not remembered: %v", err)
	}
	if err := g.check("other", "j", now.Unix(), now); err != nil {
		t.Fatalf("same id from another sender refused: %v", err)
	}
}

type cryptoRand struct{}

func (cryptoRand) Read(p []byte) (int, error) {
	id := []byte(NewID() + NewID() + NewID() + NewID())
	n := 0
	for n < len(p) {
		n += copy(p[n:], id)
		id = []byte(NewID() + NewID() + NewID() + NewID())
	}
	return n, nil
}

func FuzzUnpack(f *testing.F) {
	alice, bob := newParty(f), newParty(f)
	for _, opt := range []PackOptions{{Mode: ModePlaintext}, {Mode: ModeSigned}, {Mode: ModeAnoncrypt}, {Mode: ModeAnoncrypt, Enc: EncXC20P}, {Mode: ModeAuthcrypt}, {Mode: ModeAuthcrypt, ProtectSender: true, Sign: true}} {
		m := testMessage(f, alice, bob)
		packed, err := alice.packer().Pack(m, opt)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(packed)
	}
	f.Add([]byte(specAuthX25519))
	f.Add([]byte(specSigned))
	f.Add([]byte(`{"ciphertext":"","recipients":[]}`))
	f.Add([]byte(`{"payload":"e30","signatures":[{"protected":"e30","signature":""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u := bob.unpacker()
		u.Replay = NewReplayGuard(time.Minute, 16)
		got, err := u.Unpack(data)
		if err != nil {
			if _, ok := err.(*Problem); !ok {
				t.Fatalf("error is not a *Problem: %v", err)
			}
			return
		}
		if got.Message == nil || got.Message.ID == "" || got.Message.Type == "" {
			t.Fatalf("accepted an invalid message: %+v", got.Message)
		}
		if got.Authenticated && got.Message.From == "" {
			t.Fatal("authenticated without a sender")
		}
	})
}
