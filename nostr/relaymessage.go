package nostr

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Relay message types (the first element of the JSON array) that are not
// also client message types; EVENT, AUTH, COUNT and NEG-MSG go both ways.
const (
	MsgOK     = "OK"
	MsgEOSE   = "EOSE"
	MsgClosed = "CLOSED"
	MsgNotice = "NOTICE"
	MsgNegErr = "NEG-ERR"
)

// RelayMessage is one message from a relay to a client (NIP-01, NIP-42,
// NIP-45, NIP-77). Which fields are set depends on Type.
type RelayMessage struct {
	Type    string
	SubID   string   // EVENT, EOSE, CLOSED, COUNT, NEG-MSG, NEG-ERR
	Event   *Event   // EVENT
	EventID [32]byte // OK
	OK      bool     // OK: whether the event was accepted
	// Text is the OK, CLOSED, NOTICE or NEG-ERR message, or the AUTH
	// challenge.
	Text        string
	NegMsg      string // NEG-MSG: hex-encoded negentropy message
	Count       int64  // COUNT
	Approximate bool   // COUNT
}

// ErrUnknownType marks a relay message whose type this package does not
// know. NIP-01 lets relays add types, so a client may ignore such a
// message rather than treat the relay as broken.
var ErrUnknownType = errors.New("unknown relay message type")

// ParseRelayMessage parses one WebSocket text frame from a relay. It
// accepts what the NIPs let relays send and refuses anything else with an
// error naming the problem; an unknown message type is an error wrapping
// ErrUnknownType.
func ParseRelayMessage(data []byte) (*RelayMessage, error) {
	// Events are most of what a client reads; their usual shape has the
	// shortcut that ParseClientMessage uses.
	if sub, ev, ok := parseEventFast(data, true); ok {
		return &RelayMessage{Type: MsgEvent, SubID: sub, Event: ev}, nil
	}
	return parseRelayMessageJSON(data)
}

// parseRelayMessageJSON is the general parser, on encoding/json.
func parseRelayMessageJSON(data []byte) (*RelayMessage, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return nil, fmt.Errorf("relay message is not a JSON array: %w", plainJSONError(err))
	}
	if len(parts) == 0 {
		return nil, errors.New("relay message is an empty array")
	}
	m := new(RelayMessage)
	if err := json.Unmarshal(parts[0], &m.Type); err != nil {
		return nil, errors.New("relay message type is not a string")
	}
	str := func(i int, dst *string, what string) error {
		if i >= len(parts) {
			return fmt.Errorf("%s: missing %s", m.Type, what)
		}
		if err := json.Unmarshal(parts[i], dst); err != nil {
			return fmt.Errorf("%s: %s is not a string", m.Type, what)
		}
		return nil
	}
	want := func(n int) error {
		if len(parts) < n {
			return fmt.Errorf("%s: %d elements, want %d", m.Type, len(parts), n)
		}
		return nil
	}
	var err error
	switch m.Type {
	case MsgEvent:
		if err = want(3); err != nil {
			break
		}
		if err = str(1, &m.SubID, "subscription id"); err != nil {
			break
		}
		m.Event = new(Event)
		if err = m.Event.UnmarshalJSON(parts[2]); err != nil {
			err = fmt.Errorf("EVENT: %w", err)
		}
	case MsgOK:
		if err = want(4); err != nil {
			break
		}
		var id string
		if err = str(1, &id, "event id"); err != nil {
			break
		}
		if DecodeHex(m.EventID[:], id) != nil {
			err = errors.New("OK: event id is not 64 hex characters")
			break
		}
		if json.Unmarshal(parts[2], &m.OK) != nil {
			err = errors.New("OK: accepted is not a boolean")
			break
		}
		err = str(3, &m.Text, "message")
	case MsgEOSE:
		err = str(1, &m.SubID, "subscription id")
	case MsgClosed, MsgNegErr:
		if err = str(1, &m.SubID, "subscription id"); err != nil {
			break
		}
		if len(parts) > 2 {
			err = str(2, &m.Text, "message")
		}
	case MsgNegMsg:
		if err = str(1, &m.SubID, "subscription id"); err != nil {
			break
		}
		if len(parts) < 3 {
			err = errors.New("NEG-MSG: missing payload")
			break
		}
		err = str(2, &m.NegMsg, "payload")
	case MsgNotice, MsgAuth:
		err = str(1, &m.Text, "text")
	case MsgCount:
		if err = want(3); err != nil {
			break
		}
		if err = str(1, &m.SubID, "subscription id"); err != nil {
			break
		}
		var body struct {
			Count       *int64 `json:"count"`
			Approximate bool   `json:"approximate"`
		}
		if json.Unmarshal(parts[2], &body) != nil || body.Count == nil || *body.Count < 0 {
			err = errors.New(`COUNT: want {"count": <non-negative integer>}`)
			break
		}
		m.Count, m.Approximate = *body.Count, body.Approximate
	default:
		err = fmt.Errorf("%w %q", ErrUnknownType, m.Type)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// AppendJSON appends m as a relay-to-client message. It panics on a Type
// it does not know, which only a programming error produces.
func (m *RelayMessage) AppendJSON(b []byte) []byte {
	switch m.Type {
	case MsgEvent:
		return AppendEventMessage(b, m.SubID, m.Event.AppendJSON)
	case MsgOK:
		b = append(b, `["OK","`...)
		b = hex.AppendEncode(b, m.EventID[:])
		b = append(b, '"', ',')
		b = strconv.AppendBool(b, m.OK)
		b = append(b, ',')
		b = AppendString(b, m.Text)
		return append(b, ']')
	case MsgEOSE:
		return appendStrings(b, m.Type, m.SubID)
	case MsgClosed, MsgNegErr:
		return appendStrings(b, m.Type, m.SubID, m.Text)
	case MsgNegMsg:
		return appendStrings(b, m.Type, m.SubID, m.NegMsg)
	case MsgNotice, MsgAuth:
		return appendStrings(b, m.Type, m.Text)
	case MsgCount:
		b = appendStrings(b, m.Type, m.SubID)
		b = append(b[:len(b)-1], `,{"count":`...)
		b = strconv.AppendInt(b, m.Count, 10)
		if m.Approximate {
			b = append(b, `,"approximate":true`...)
		}
		return append(b, "}]"...)
	}
	panic(fmt.Sprintf("nostr: no relay message of type %q", m.Type))
}

// AppendEventMessage appends ["EVENT",subID,<event>] to b, where
// appendEvent appends the event's JSON: Event.AppendJSON, or the same
// method of a stored record, so that an event read from storage goes onto
// the wire without first becoming an Event.
func AppendEventMessage(b []byte, subID string, appendEvent func([]byte) []byte) []byte {
	b = append(b, `["EVENT",`...)
	b = AppendString(b, subID)
	b = append(b, ',')
	b = appendEvent(b)
	return append(b, ']')
}

// appendStrings appends a JSON array of strings.
func appendStrings(b []byte, ss ...string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}
