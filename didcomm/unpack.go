package didcomm

import (
	"bytes"
	"encoding/json"
	"time"
)

// Limits bound what Unpack accepts.
type Limits struct {
	// MaxMessageBytes is the largest packed message accepted.
	MaxMessageBytes int
	// MaxRecipients is the most JWE recipients accepted (each costs a key
	// agreement to try).
	MaxRecipients int
	// MaxSignatures is the most JWS signatures accepted.
	MaxSignatures int
	// MaxNesting is the most envelopes around a plaintext (anoncrypt of
	// authcrypt of signed is 3).
	MaxNesting int
	// ClockSkew is how far in the future created_time may be.
	ClockSkew time.Duration
}

// Default limits.
const (
	DefaultMaxMessageBytes = 1 << 20
	DefaultMaxRecipients   = 16
	DefaultMaxSignatures   = 4
	DefaultMaxNesting      = 3
	DefaultClockSkew       = 5 * time.Minute
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{
		MaxMessageBytes: DefaultMaxMessageBytes,
		MaxRecipients:   DefaultMaxRecipients,
		MaxSignatures:   DefaultMaxSignatures,
		MaxNesting:      DefaultMaxNesting,
		ClockSkew:       DefaultClockSkew,
	}
}

// Unpacked is an unpacked message and what the envelopes proved.
type Unpacked struct {
	Message   *Message
	Plaintext []byte
	// Mode is the outermost envelope.
	Mode Mode
	// Encrypted: some envelope was a JWE. Authenticated: the sender was
	// proven by authcrypt or a signature, and From is that sender.
	// NonRepudiable: a signature proves it to third parties too.
	Encrypted, Authenticated, NonRepudiable bool
	SenderKID                               string   // authcrypt skid
	SignerKIDs                              []string // JWS signers
	RecipientKID                            string   // our key the JWE was opened with
	Enc                                     string   // content encryption of the innermost JWE
}

// Unpacker unpacks messages addressed to one DID.
type Unpacker struct {
	Secrets  *Secrets // nil unpacks only plaintext and signed messages
	Resolver Resolver
	Limits   Limits
	// Replay, when set, refuses a message (sender, id) seen before.
	Replay *ReplayGuard
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Unpack opens every envelope of data, verifies what they claim and
// returns the plaintext message. Errors are *Problem values.
func (u *Unpacker) Unpack(data []byte) (*Unpacked, error) {
	lim := u.Limits
	if lim.MaxMessageBytes == 0 {
		lim = DefaultLimits()
	}
	if len(data) > lim.MaxMessageBytes {
		return nil, problemf(CodeTooBig, "message is %d bytes, the limit is %d", len(data), lim.MaxMessageBytes)
	}
	out := &Unpacked{}
	cur := data
	for depth := 0; ; depth++ {
		if depth > lim.MaxNesting {
			return nil, problemf(CodeMalformed, "more than %d nested envelopes", lim.MaxNesting)
		}
		kind, err := sniff(cur)
		if err != nil {
			return nil, err
		}
		if depth == 0 {
			out.Mode = kind
		}
		switch kind {
		case ModePlaintext:
			return u.finish(out, cur, lim)
		case ModeSigned:
			v, err := verify(cur, u.Resolver, lim.MaxSignatures)
			if err != nil {
				return nil, err
			}
			out.NonRepudiable = true
			out.SignerKIDs = append(out.SignerKIDs, v.signers...)
			cur = v.payload
			if k, _ := sniff(cur); k != ModePlaintext {
				return nil, problemf(CodeMalformed, "a signed message must carry a plaintext, not %s", k)
			}
		default:
			if out.NonRepudiable {
				return nil, problemf(CodeMalformed, "encryption inside a signature")
			}
			var j jweJSON
			if err := json.Unmarshal(cur, &j); err != nil {
				return nil, problemf(CodeMalformed, "JWE: %v", err)
			}
			d, err := decrypt(&j, u.Secrets, u.Resolver, lim.MaxRecipients)
			if err != nil {
				return nil, err
			}
			if out.SenderKID != "" && d.alg == AlgAnon {
				return nil, problemf(CodeMalformed, "anoncrypt inside authcrypt")
			}
			if depth == 0 && d.alg == AlgAuth {
				out.Mode = ModeAuthcrypt
			}
			out.Encrypted = true
			out.Enc = d.enc
			out.RecipientKID = d.recipientKID
			if d.senderKID != "" {
				if out.SenderKID != "" {
					return nil, problemf(CodeMalformed, "authcrypt inside authcrypt")
				}
				out.SenderKID = d.senderKID
			}
			cur = d.payload
		}
	}
}

// finish parses the plaintext and applies the receiver rules.
func (u *Unpacker) finish(out *Unpacked, plain []byte, lim Limits) (*Unpacked, error) {
	var m Message
	if err := json.Unmarshal(plain, &m); err != nil {
		return nil, problemf(CodeMalformed, "plaintext: %v", err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	out.Message = &m
	out.Plaintext = plain
	if out.SenderKID != "" {
		if m.From == "" || didOf(out.SenderKID) != m.From {
			return nil, problemf(CodeSenderMismatch, "from %q is not the DID of the sender key %s", m.From, out.SenderKID)
		}
		out.Authenticated = true
	}
	for _, s := range out.SignerKIDs {
		if m.From == "" || didOf(s) != m.From {
			return nil, problemf(CodeSenderMismatch, "from %q is not the DID of the signer %s", m.From, s)
		}
		out.Authenticated = true
	}
	if out.Encrypted && len(m.To) > 0 && !contains(m.To, didOf(out.RecipientKID)) {
		return nil, problemf(CodeNotRecipient, "to %v does not name %s", m.To, didOf(out.RecipientKID))
	}
	now := time.Now()
	if u.Now != nil {
		now = u.Now()
	}
	if m.ExpiresTime > 0 && now.Unix() > m.ExpiresTime {
		return nil, problemf(CodeExpired, "message %s expired at %d", m.ID, m.ExpiresTime)
	}
	if m.CreatedTime > 0 && time.Unix(m.CreatedTime, 0).After(now.Add(lim.ClockSkew)) {
		return nil, problemf(CodeExpired, "message %s is created in the future (%d)", m.ID, m.CreatedTime)
	}
	if u.Replay != nil {
		sender := ""
		if out.Authenticated {
			sender = m.From
		}
		if err := u.Replay.check(sender, m.ID, m.CreatedTime, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sniff tells the envelope kind from the top-level members of a JSON
// object.
func sniff(data []byte) (Mode, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return "", problemf(CodeMalformed, "not a JSON object")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return "", problemf(CodeMalformed, "not a JSON object: %v", err)
	}
	_, hasCT := top["ciphertext"]
	_, hasPayload := top["payload"]
	switch {
	case hasCT:
		return ModeAnoncrypt, nil // decrypt tells authcrypt apart
	case hasPayload:
		return ModeSigned, nil
	}
	if _, ok := top["type"]; ok {
		return ModePlaintext, nil
	}
	return "", problemf(CodeMalformed, "neither a plaintext, a JWS nor a JWE")
}

// String describes the envelopes, e.g. "authcrypt", "anoncrypt(signed)".
func (u *Unpacked) String() string {
	s := string(u.Mode)
	if u.Mode == ModeAnoncrypt && u.SenderKID != "" {
		s += "(authcrypt)"
	}
	if u.Encrypted && u.NonRepudiable {
		s += "(signed)"
	}
	return s
}
