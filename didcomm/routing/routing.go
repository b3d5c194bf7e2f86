// Package routing implements Routing 2.0's forward message
// (https://didcomm.org/routing/2.0/, DIDComm Messaging v2 spec § "Routing
// Protocol 2.0"): an encrypted message for `next`, attached to a forward
// message that is itself encrypted to a mediator.
//
// It wraps and unwraps; what a mediator does with a forward (queue it for
// pickup) is didcomm/mediator's job.
package routing

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"fleetmesh.org/fleetmesh/didcomm"
)

// PIURI and message type.
const (
	PIURI       = "https://didcomm.org/routing/2.0"
	TypeForward = PIURI + "/forward"
)

// Body is a forward's body.
type Body struct {
	Next string `json:"next"`
}

// Wrap returns a forward message to mediator carrying packed (an encrypted
// message) for next.
func Wrap(packed []byte, next, mediator string) (*didcomm.Message, error) {
	if !json.Valid(packed) {
		return nil, errors.New("routing: the forwarded message is not JSON")
	}
	m, err := didcomm.NewMessage(TypeForward, Body{Next: next})
	if err != nil {
		return nil, err
	}
	m.To = []string{mediator}
	m.Attachments = []didcomm.Attachment{{ID: didcomm.NewID(), MediaType: didcomm.MediaTypeEncrypted, Data: didcomm.AttachmentData{JSON: packed}}}
	return m, nil
}

// Route packs inner (already encrypted for next) into an anoncrypted
// forward to mediator: what a sender posts to a leaf's mediator.
func Route(p *didcomm.Packer, inner []byte, next, mediator string) ([]byte, error) {
	fwd, err := Wrap(inner, next, mediator)
	if err != nil {
		return nil, err
	}
	return p.Pack(fwd, didcomm.PackOptions{Mode: didcomm.ModeAnoncrypt})
}

// Unwrap returns the forward's next and the attached message.
func Unwrap(m *didcomm.Message) (next string, packed []byte, err error) {
	if m.Type != TypeForward {
		return "", nil, &didcomm.Problem{Code: didcomm.CodeUnsupportedType, Err: fmt.Errorf("%s is not a forward", m.Type)}
	}
	var b Body
	if err := json.Unmarshal(m.Body, &b); err != nil || b.Next == "" {
		return "", nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: errors.New("forward without next")}
	}
	if len(m.Attachments) != 1 {
		return "", nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("forward with %d attachments (want 1)", len(m.Attachments))}
	}
	d := m.Attachments[0].Data
	switch {
	case len(d.JSON) > 0:
		packed = d.JSON
	case d.Base64 != "":
		if packed, err = decodeBase64(d.Base64); err != nil {
			return "", nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("forward attachment: %w", err)}
		}
	default:
		return "", nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: errors.New("forward attachment has no data")}
	}
	if !json.Valid(packed) {
		return "", nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: errors.New("forwarded message is not JSON")}
	}
	return b.Next, packed, nil
}

// decodeBase64 accepts both alphabets, padded or not, as senders differ.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}
