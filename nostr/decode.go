package nostr

import (
	"encoding/json"
	"errors"
	"fmt"
)

// wireEvent is the JSON shape of an event before its hex fields are checked.
type wireEvent struct {
	ID        *string    `json:"id"`
	PubKey    *string    `json:"pubkey"`
	CreatedAt *int64     `json:"created_at"`
	Kind      *int       `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   *string    `json:"content"`
	Sig       *string    `json:"sig"`
}

// MaxKind is the largest kind NIP-01 allows.
const MaxKind = 65535

// UnmarshalJSON parses a NIP-01 event object. Every field is required and
// hex fields must be lowercase and of the right length; the error says which
// field is wrong so a client developer can fix it.
func (e *Event) UnmarshalJSON(data []byte) error {
	var w wireEvent
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("malformed event: %w", plainJSONError(err))
	}
	switch {
	case w.ID == nil:
		return errors.New(`event has no "id"`)
	case w.PubKey == nil:
		return errors.New(`event has no "pubkey"`)
	case w.CreatedAt == nil:
		return errors.New(`event has no "created_at"`)
	case w.Kind == nil:
		return errors.New(`event has no "kind"`)
	case w.Content == nil:
		return errors.New(`event has no "content"`)
	case w.Sig == nil:
		return errors.New(`event has no "sig"`)
	case w.Tags == nil:
		return errors.New(`event has no "tags" array`)
	}
	if err := DecodeHex(e.ID[:], *w.ID); err != nil {
		return fmt.Errorf(`"id" %w`, err)
	}
	if err := DecodeHex(e.PubKey[:], *w.PubKey); err != nil {
		return fmt.Errorf(`"pubkey" %w`, err)
	}
	if err := DecodeHex(e.Sig[:], *w.Sig); err != nil {
		return fmt.Errorf(`"sig" %w`, err)
	}
	if *w.CreatedAt < 0 {
		return errors.New(`"created_at" is negative`)
	}
	if *w.Kind < 0 || *w.Kind > MaxKind {
		return fmt.Errorf(`"kind" %d is outside 0..%d`, *w.Kind, MaxKind)
	}
	for i, t := range w.Tags {
		if len(t) == 0 {
			return fmt.Errorf("tag %d is empty", i)
		}
	}
	e.CreatedAt = *w.CreatedAt
	e.Kind = *w.Kind
	e.Tags = w.Tags
	e.Content = *w.Content
	return nil
}

// DecodeHex decodes lowercase hex of exactly len(dst) bytes, the form of
// ids, pubkeys and signatures on the wire; the error says what is wrong in
// words a client developer can act on.
func DecodeHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("must be %d lowercase hex characters, got %d characters", 2*len(dst), len(s))
	}
	for i := range dst {
		hi, lo := unhexLower(s[2*i]), unhexLower(s[2*i+1])
		if hi > 15 || lo > 15 {
			at := 2 * i
			if hi <= 15 {
				at++
			}
			return fmt.Errorf("must be lowercase hex, found %q at %d", s[at], at)
		}
		dst[i] = hi<<4 | lo
	}
	return nil
}

// unhexLower is the value of a lowercase hex digit, or 255.
func unhexLower(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return 255
}

// plainJSONError strips Go type names from encoding/json errors, which mean
// nothing to a client developer.
func plainJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Errorf("field %q has the wrong type (%s)", te.Field, te.Value)
		}
		return fmt.Errorf("wrong JSON type (%s)", te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	}
	return err
}
