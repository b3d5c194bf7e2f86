// Package problemreport implements Report Problem 2.0
// (https://didcomm.org/report-problem/2.0/, DIDComm Messaging v2 spec §
// "Problem Reports"): the message a fleetmesh node answers with whenever it
// refuses or cannot handle a message, so that no failure is silent.
//
// Codes come from didcomm.Problem (didcomm's Code* constants); this package
// only turns them into messages and back.
package problemreport

import (
	"encoding/json"
	"errors"

	"fleetmesh.org/fleetmesh/didcomm"
)

// PIURI and the message type.
const (
	PIURI = "https://didcomm.org/report-problem/2.0"
	Type  = PIURI + "/problem-report"
)

// Body is a problem report's body.
type Body struct {
	Code       string   `json:"code"`
	Comment    string   `json:"comment,omitempty"`
	Args       []string `json:"args,omitempty"`
	EscalateTo string   `json:"escalate_to,omitempty"`
}

// New returns a problem report for err about the message with thread id
// thid (empty when the message could not be read at all). An error that
// is not a *didcomm.Problem reports the generic e.p.me code.
func New(err error, self, to, thid string) (*didcomm.Message, error) {
	code := didcomm.CodeInternal
	var p *didcomm.Problem
	if errors.As(err, &p) {
		code = p.Code
	}
	m, merr := didcomm.NewMessage(Type, Body{Code: code, Comment: err.Error()})
	if merr != nil {
		return nil, merr
	}
	m.From, m.Pthid = self, thid
	if to != "" {
		m.To = []string{to}
	}
	return m, nil
}

// Parse reads a problem report's body.
func Parse(m *didcomm.Message) (*Body, error) {
	if m.Type != Type {
		return nil, &didcomm.Problem{Code: didcomm.CodeUnsupportedType, Err: errors.New("not a problem report")}
	}
	var b Body
	if err := json.Unmarshal(m.Body, &b); err != nil || b.Code == "" {
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: errors.New("problem report without a code")}
	}
	return &b, nil
}
