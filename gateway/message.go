package gateway

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"fleetmesh.org/fleetmesh/nostr"
)

// Relay → client message types (NIP-01, NIP-42, NIP-45, NIP-77).
const (
	msgEvent  = "EVENT"
	msgOK     = "OK"
	msgEOSE   = "EOSE"
	msgClosed = "CLOSED"
	msgNotice = "NOTICE"
	msgAuth   = "AUTH"
	msgCount  = "COUNT"
	msgNegMsg = "NEG-MSG"
	msgNegErr = "NEG-ERR"
)

// relayMsg is one parsed message from the backend. Which fields are set
// depends on Type.
type relayMsg struct {
	Type    string
	SubID   string       // EVENT, EOSE, CLOSED, COUNT, NEG-*
	Event   *nostr.Event // EVENT
	EventID [32]byte     // OK
	OK      bool         // OK
	// Text is the OK/CLOSED/NOTICE/NEG-ERR message, the AUTH challenge, or
	// the NEG-MSG hex payload.
	Text string
}

// parseRelayMessage parses one WebSocket text frame from a relay. It
// accepts what NIP-01 lets relays send and refuses anything else with an
// error naming the problem; unknown message types are an error the caller
// may ignore (errUnknownType).
func parseRelayMessage(data []byte) (relayMsg, error) {
	var m relayMsg
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return m, fmt.Errorf("relay message is not a JSON array: %w", err)
	}
	if len(parts) == 0 {
		return m, errors.New("relay message is an empty array")
	}
	if err := json.Unmarshal(parts[0], &m.Type); err != nil {
		return m, errors.New("relay message type is not a string")
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
	switch m.Type {
	case msgEvent:
		if err := want(3); err != nil {
			return m, err
		}
		if err := str(1, &m.SubID, "subscription id"); err != nil {
			return m, err
		}
		m.Event = new(nostr.Event)
		if err := m.Event.UnmarshalJSON(parts[2]); err != nil {
			return m, fmt.Errorf("EVENT: %w", err)
		}
	case msgOK:
		if err := want(4); err != nil {
			return m, err
		}
		var id string
		if err := str(1, &id, "event id"); err != nil {
			return m, err
		}
		b, err := hex.DecodeString(id)
		if err != nil || len(b) != 32 {
			return m, errors.New("OK: event id is not 64 hex characters")
		}
		copy(m.EventID[:], b)
		if err := json.Unmarshal(parts[2], &m.OK); err != nil {
			return m, errors.New("OK: accepted is not a boolean")
		}
		if err := str(3, &m.Text, "message"); err != nil {
			return m, err
		}
	case msgEOSE:
		if err := str(1, &m.SubID, "subscription id"); err != nil {
			return m, err
		}
	case msgClosed, msgNegErr, msgNegMsg:
		if err := str(1, &m.SubID, "subscription id"); err != nil {
			return m, err
		}
		if len(parts) > 2 {
			if err := str(2, &m.Text, "message"); err != nil {
				return m, err
			}
		} else if m.Type == msgNegMsg {
			return m, errors.New("NEG-MSG: missing payload")
		}
	case msgNotice, msgAuth:
		if err := str(1, &m.Text, "text"); err != nil {
			return m, err
		}
	case msgCount:
		if err := str(1, &m.SubID, "subscription id"); err != nil {
			return m, err
		}
	default:
		return m, fmt.Errorf("%w %q", errUnknownType, m.Type)
	}
	return m, nil
}

// errUnknownType marks a message type this client does not know; NIP-01
// lets relays add types, so the session ignores it.
var errUnknownType = errors.New("unknown relay message type")

// frame builds a client → relay message.
func frame(parts ...any) []byte {
	b, err := json.Marshal(parts)
	if err != nil {
		// Every part is a string, a filter or an event: all marshal.
		panic(fmt.Sprintf("gateway: frame: %v", err))
	}
	return b
}

// eventJSON is an event as a json.RawMessage, so frame writes it verbatim
// in the canonical field order of nostr.Event.AppendJSON.
func eventJSON(ev *nostr.Event) json.RawMessage { return ev.AppendJSON(nil) }
