package didcomm

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Mode is a DIDComm envelope kind.
type Mode string

// The four envelope modes.
const (
	ModePlaintext Mode = "plaintext"
	ModeSigned    Mode = "signed"
	ModeAnoncrypt Mode = "anoncrypt"
	ModeAuthcrypt Mode = "authcrypt"
)

// ParseMode parses a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModePlaintext, ModeSigned, ModeAnoncrypt, ModeAuthcrypt:
		return m, nil
	}
	return "", fmt.Errorf("didcomm: unknown mode %q (plaintext, signed, anoncrypt or authcrypt)", s)
}

// PackOptions choose the envelope.
type PackOptions struct {
	Mode Mode
	// Enc is the content encryption for anoncrypt (A256CBC-HS512 when
	// empty). Authcrypt always uses A256CBC-HS512.
	Enc string
	// Sign adds a signature inside the encryption, for non-repudiation.
	Sign bool
	// ProtectSender wraps an authcrypt message in anoncrypt so that
	// mediators do not see skid.
	ProtectSender bool
}

// Packer packs messages from one DID.
type Packer struct {
	Secrets  *Secrets // the sender's keys; nil packs only plaintext and anoncrypt
	Resolver Resolver
	// Rand is the randomness source (crypto/rand when nil).
	Rand io.Reader
}

// ErrNoRecipients is returned when an encrypted message names no recipient.
var ErrNoRecipients = errors.New("message has no `to`")

// Pack serializes m in the chosen envelope, encrypting to every DID in
// m.To. For authcrypt and signed modes m.From is set to the packer's DID if
// empty, and must equal it otherwise.
func (p *Packer) Pack(m *Message, opt PackOptions) ([]byte, error) {
	msg := *m
	if msg.Typ == "" {
		msg.Typ = MediaTypePlain
	}
	if len(msg.Body) == 0 {
		msg.Body = json.RawMessage("{}")
	}
	needsSender := opt.Mode == ModeAuthcrypt || opt.Mode == ModeSigned || opt.Sign
	if needsSender {
		if p.Secrets == nil {
			return nil, fmt.Errorf("didcomm: %s needs the sender's keys", opt.Mode)
		}
		if msg.From == "" {
			msg.From = p.Secrets.DID
		}
		if msg.From != p.Secrets.DID {
			return nil, fmt.Errorf("didcomm: from %s is not the packer's DID %s", msg.From, p.Secrets.DID)
		}
	}
	if err := msg.validate(); err != nil {
		return nil, err
	}
	plain, err := json.Marshal(&msg)
	if err != nil {
		return nil, fmt.Errorf("didcomm: %w", err)
	}
	switch opt.Mode {
	case ModePlaintext:
		return plain, nil
	case ModeSigned:
		return p.sign(plain)
	case ModeAnoncrypt, ModeAuthcrypt:
	default:
		return nil, fmt.Errorf("didcomm: unknown mode %q", opt.Mode)
	}
	payload := plain
	if opt.Sign {
		if payload, err = p.sign(plain); err != nil {
			return nil, err
		}
	}
	if len(msg.To) == 0 {
		return nil, fmt.Errorf("didcomm: %w", ErrNoRecipients)
	}
	random := p.Rand
	if random == nil {
		random = rand.Reader
	}
	if opt.Mode == ModeAnoncrypt {
		enc := opt.Enc
		if enc == "" {
			enc = EncA256CBCHS512
		}
		keys, err := p.recipientKeys(msg.To, nil)
		if err != nil {
			return nil, err
		}
		out, err := encrypt(payload, keys, nil, enc, random)
		if err != nil {
			return nil, fmt.Errorf("didcomm: anoncrypt: %w", err)
		}
		return out, nil
	}
	var lastErr error
	for i := range p.Secrets.Agreement {
		sender := &p.Secrets.Agreement[i]
		keys, err := p.recipientKeys(msg.To, sender)
		if err != nil {
			lastErr = err
			continue
		}
		out, err := encrypt(payload, keys, sender, EncA256CBCHS512, random)
		if err != nil {
			return nil, fmt.Errorf("didcomm: authcrypt: %w", err)
		}
		if !opt.ProtectSender {
			return out, nil
		}
		// Anoncrypt the authcrypt JWE to the same recipients (spec
		// "Protecting the sender identity").
		outer, err := encrypt(out, keys, nil, EncA256CBCHS512, random)
		if err != nil {
			return nil, fmt.Errorf("didcomm: protect sender: %w", err)
		}
		return outer, nil
	}
	if lastErr == nil {
		lastErr = errors.New("sender has no key-agreement key")
	}
	return nil, fmt.Errorf("didcomm: authcrypt: %w", lastErr)
}

func (p *Packer) sign(plain []byte) ([]byte, error) {
	s, err := signingSecret(p.Secrets)
	if err != nil {
		return nil, fmt.Errorf("didcomm: signed: %w", err)
	}
	out, err := sign(plain, s)
	if err != nil {
		return nil, fmt.Errorf("didcomm: signed: %w", err)
	}
	return out, nil
}

// recipientKeys resolves every DID in to and keeps the key-agreement keys on
// one curve: the sender's for authcrypt, else the first recipient's first
// key's. Every DID must have at least one key on it.
func (p *Packer) recipientKeys(to []string, sender *AgreementSecret) ([]AgreementKey, error) {
	var curve ecdh.Curve
	if sender != nil {
		curve = sender.Key.Curve()
	}
	var out []AgreementKey
	for _, did := range to {
		ks, err := p.Resolver.Resolve(didOf(did))
		if err != nil {
			return nil, err
		}
		if curve == nil && len(ks.KeyAgreement) > 0 {
			curve = ks.KeyAgreement[0].Key.Curve()
		}
		n := len(out)
		for _, k := range ks.KeyAgreement {
			if k.Key.Curve() == curve {
				out = append(out, k)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s has no key-agreement key on a curve the sender can use", did)
		}
	}
	return out, nil
}
