package didcomm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Media types of the three envelope formats (spec "IANA Media Types").
const (
	MediaTypePlain     = "application/didcomm-plain+json"
	MediaTypeSigned    = "application/didcomm-signed+json"
	MediaTypeEncrypted = "application/didcomm-encrypted+json"
)

// Message is a DIDComm plaintext message. Headers this package does not
// know are ignored on decoding, as the spec requires.
type Message struct {
	ID          string          `json:"id"`
	Typ         string          `json:"typ,omitempty"`
	Type        string          `json:"type"`
	From        string          `json:"from,omitempty"`
	To          []string        `json:"to,omitempty"`
	Thid        string          `json:"thid,omitempty"`
	Pthid       string          `json:"pthid,omitempty"`
	CreatedTime int64           `json:"created_time,omitempty"`
	ExpiresTime int64           `json:"expires_time,omitempty"`
	Body        json.RawMessage `json:"body"`
	Attachments []Attachment    `json:"attachments,omitempty"`
	// ReturnRoute asks the receiver to answer on the same connection
	// ("all"), per the return_route extension.
	ReturnRoute string `json:"return_route,omitempty"`
}

// Attachment is a DIDComm attachment. fleetmesh uses embedded JSON (an
// encrypted message carried by forward, pickup delivery, or an invitation's
// payload) and base64.
type Attachment struct {
	ID        string         `json:"id,omitempty"`
	MediaType string         `json:"media_type,omitempty"`
	Format    string         `json:"format,omitempty"`
	Data      AttachmentData `json:"data"`
}

// AttachmentData holds an attachment's content.
type AttachmentData struct {
	JSON   json.RawMessage `json:"json,omitempty"`
	Base64 string          `json:"base64,omitempty"`
}

// NewMessage returns a message of the given type with a fresh random id,
// created now, with body marshalled from body (an empty object when nil).
func NewMessage(typ string, body any) (*Message, error) {
	raw := json.RawMessage("{}")
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	return &Message{
		ID:          NewID(),
		Typ:         MediaTypePlain,
		Type:        typ,
		CreatedTime: time.Now().Unix(),
		Body:        raw,
	}, nil
}

// NewID returns a random message id (128 bits, hex).
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// Thread returns the message's thread id: thid, or its own id when it
// starts a thread.
func (m *Message) Thread() string {
	if m.Thid != "" {
		return m.Thid
	}
	return m.ID
}

// validate checks the headers the spec requires of every plaintext.
func (m *Message) validate() error {
	switch {
	case m.ID == "":
		return problemf(CodeMalformed, "message has no id")
	case m.Type == "":
		return problemf(CodeMalformed, "message %s has no type", m.ID)
	case m.Typ != "" && m.Typ != MediaTypePlain:
		return problemf(CodeMalformed, "message %s: typ %q", m.ID, m.Typ)
	case len(m.Body) == 0 || m.Body[0] != '{':
		return problemf(CodeMalformed, "message %s: body must be a JSON object", m.ID)
	}
	return nil
}
