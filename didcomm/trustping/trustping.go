// Package trustping implements the Trust Ping 2.0 protocol
// (https://didcomm.org/trust-ping/2.0/, DIDComm Messaging v2 spec §
// "Trust Ping Protocol 2.0"): a ping that asks a DID to prove it is
// reachable, and its response.
//
// It builds and answers messages; it does not send them (see didcomm/agent
// and didcomm/transport).
package trustping

import (
	"encoding/json"
	"fmt"

	"fleetmesh.org/fleetmesh/didcomm"
)

// PIURI is the protocol identifier; the message types are under it.
const (
	PIURI        = "https://didcomm.org/trust-ping/2.0"
	TypePing     = PIURI + "/ping"
	TypeResponse = PIURI + "/ping-response"
)

// PingBody is a ping's body. ResponseRequested defaults to true when absent.
type PingBody struct {
	ResponseRequested *bool `json:"response_requested,omitempty"`
}

// NewPing returns a ping from one DID to another asking for a response.
func NewPing(from, to string) (*didcomm.Message, error) {
	yes := true
	m, err := didcomm.NewMessage(TypePing, PingBody{ResponseRequested: &yes})
	if err != nil {
		return nil, err
	}
	m.From, m.To = from, []string{to}
	return m, nil
}

// Answer returns the response to ping, or nil when the ping asked for none.
func Answer(ping *didcomm.Message, self string) (*didcomm.Message, error) {
	var b PingBody
	if err := json.Unmarshal(ping.Body, &b); err != nil {
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("trust-ping body: %w", err)}
	}
	if b.ResponseRequested != nil && !*b.ResponseRequested {
		return nil, nil
	}
	r, err := didcomm.NewMessage(TypeResponse, nil)
	if err != nil {
		return nil, err
	}
	r.From, r.Thid = self, ping.ID
	if ping.From != "" {
		r.To = []string{ping.From}
	}
	return r, nil
}

// IsResponseTo reports whether m answers the ping with id pingID.
func IsResponseTo(m *didcomm.Message, pingID string) bool {
	return m.Type == TypeResponse && m.Thid == pingID
}
