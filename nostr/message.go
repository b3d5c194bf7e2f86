package nostr

import (
	"encoding/json"
	"errors"
	"fmt"
)

// MaxSubIDLen is NIP-01's bound on subscription ids.
const MaxSubIDLen = 64

// Client message types (the first element of the JSON array).
const (
	MsgEvent    = "EVENT"
	MsgReq      = "REQ"
	MsgClose    = "CLOSE"
	MsgCount    = "COUNT"
	MsgAuth     = "AUTH"
	MsgNegOpen  = "NEG-OPEN"
	MsgNegMsg   = "NEG-MSG"
	MsgNegClose = "NEG-CLOSE"
)

// ClientMessage is one parsed message from a client. Which fields are set
// depends on Type.
type ClientMessage struct {
	Type    string
	SubID   string   // REQ, CLOSE, COUNT, NEG-*
	Event   *Event   // EVENT, AUTH
	Filters []Filter // REQ, COUNT; NEG-OPEN has exactly one
	NegMsg  string   // NEG-OPEN, NEG-MSG: hex-encoded negentropy message
}

// ParseError is a message the relay could not parse. SubID is set when the
// message got far enough to name a subscription, so the relay can answer
// with CLOSED instead of a NOTICE; EventID likewise for an OK false.
type ParseError struct {
	Type    string
	SubID   string
	EventID string
	Err     error
}

func (e *ParseError) Error() string {
	if e.Type == "" {
		return e.Err.Error()
	}
	return e.Type + ": " + e.Err.Error()
}

func (e *ParseError) Unwrap() error { return e.Err }

// ParseClientMessage parses one WebSocket text frame from a client.
func ParseClientMessage(data []byte) (*ClientMessage, error) {
	// EVENT is most of what a relay reads; its usual shape has a shortcut
	// that yields the same message as the general path below.
	if _, ev, ok := parseEventFast(data, false); ok {
		return &ClientMessage{Type: MsgEvent, Event: ev}, nil
	}
	return parseClientMessageJSON(data)
}

// parseClientMessageJSON is the general parser, on encoding/json.
func parseClientMessageJSON(data []byte) (*ClientMessage, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return nil, &ParseError{Err: fmt.Errorf("message is not a JSON array: %w", plainJSONError(err))}
	}
	if len(parts) == 0 {
		return nil, &ParseError{Err: errors.New("message is an empty array")}
	}
	var typ string
	if err := json.Unmarshal(parts[0], &typ); err != nil {
		return nil, &ParseError{Err: errors.New("first element must be the message type string")}
	}
	m := &ClientMessage{Type: typ}
	perr := func(err error) error { return &ParseError{Type: typ, SubID: m.SubID, Err: err} }
	switch typ {
	case MsgEvent, MsgAuth:
		if len(parts) != 2 {
			return nil, perr(fmt.Errorf("want [%q, <event>], got %d elements", typ, len(parts)))
		}
		ev := new(Event)
		if err := json.Unmarshal(parts[1], ev); err != nil {
			return nil, &ParseError{Type: typ, EventID: peekID(parts[1]), Err: err}
		}
		m.Event = ev
	case MsgReq, MsgCount:
		if len(parts) < 3 {
			return nil, perr(fmt.Errorf("want [%q, <subscription id>, <filter>, ...]", typ))
		}
		if err := parseSubID(parts[1], &m.SubID); err != nil {
			return nil, perr(err)
		}
		m.Filters = make([]Filter, len(parts)-2)
		for i, raw := range parts[2:] {
			if err := json.Unmarshal(raw, &m.Filters[i]); err != nil {
				return nil, perr(err)
			}
		}
	case MsgClose, MsgNegClose:
		if len(parts) != 2 {
			return nil, perr(fmt.Errorf("want [%q, <subscription id>]", typ))
		}
		if err := parseSubID(parts[1], &m.SubID); err != nil {
			return nil, perr(err)
		}
	case MsgNegOpen:
		if len(parts) != 4 {
			return nil, perr(errors.New(`want ["NEG-OPEN", <subscription id>, <filter>, <hex message>]`))
		}
		if err := parseSubID(parts[1], &m.SubID); err != nil {
			return nil, perr(err)
		}
		m.Filters = make([]Filter, 1)
		if err := json.Unmarshal(parts[2], &m.Filters[0]); err != nil {
			return nil, perr(err)
		}
		if err := json.Unmarshal(parts[3], &m.NegMsg); err != nil {
			return nil, perr(errors.New("negentropy message must be a hex string"))
		}
	case MsgNegMsg:
		if len(parts) != 3 {
			return nil, perr(errors.New(`want ["NEG-MSG", <subscription id>, <hex message>]`))
		}
		if err := parseSubID(parts[1], &m.SubID); err != nil {
			return nil, perr(err)
		}
		if err := json.Unmarshal(parts[2], &m.NegMsg); err != nil {
			return nil, perr(errors.New("negentropy message must be a hex string"))
		}
	default:
		return nil, perr(errors.New("unknown message type"))
	}
	return m, nil
}

func parseSubID(raw json.RawMessage, dst *string) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return errors.New("subscription id must be a string")
	}
	if *dst == "" || len(*dst) > MaxSubIDLen {
		id := *dst
		*dst = ""
		return fmt.Errorf("subscription id must be 1 to %d characters, got %d", MaxSubIDLen, len(id))
	}
	return nil
}

// peekID pulls a well-formed id out of an event that failed to parse, so
// the relay can answer OK false for it rather than a bare NOTICE.
func peekID(raw json.RawMessage) string {
	var w struct {
		ID string `json:"id"`
	}
	var id [32]byte
	if json.Unmarshal(raw, &w) == nil && DecodeHex(id[:], w.ID) == nil {
		return w.ID
	}
	return ""
}

// AppendJSON appends m as a client-to-relay message. It panics on a Type
// it does not know, which only a programming error produces.
func (m *ClientMessage) AppendJSON(b []byte) []byte {
	switch m.Type {
	case MsgEvent, MsgAuth:
		b = append(b, '[')
		b = AppendString(b, m.Type)
		b = append(b, ',')
		b = m.Event.AppendJSON(b)
		return append(b, ']')
	case MsgReq, MsgCount, MsgNegOpen:
		b = appendStrings(b, m.Type, m.SubID)
		b = b[:len(b)-1]
		for i := range m.Filters {
			b = append(b, ',')
			b = m.Filters[i].AppendJSON(b)
		}
		if m.Type == MsgNegOpen {
			b = append(b, ',')
			b = AppendString(b, m.NegMsg)
		}
		return append(b, ']')
	case MsgClose, MsgNegClose:
		return appendStrings(b, m.Type, m.SubID)
	case MsgNegMsg:
		return appendStrings(b, m.Type, m.SubID, m.NegMsg)
	}
	panic(fmt.Sprintf("nostr: no client message of type %q", m.Type))
}
