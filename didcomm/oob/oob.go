// Package oob implements Out-of-Band 2.0 invitations
// (https://didcomm.org/out-of-band/2.0/, DIDComm Messaging v2 spec §
// "Out Of Band Messages"): a plaintext invitation, passed as a URL with an
// `_oob` parameter or as a QR code of that URL, that lets a phone pair with
// an anchor it has never talked to.
//
// A did:key DID document has no service endpoints, so fleetmesh's
// invitation body also lists where to reach the inviter (`services`,
// shaped like a DID document's DIDCommMessaging service). This extension
// is described in spec/didcomm.md; receivers that do not know it ignore it.
//
// It is not a QR decoder: Parse reads the URL a scanner produced.
package oob

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"rsc.io/qr"

	"fleetmesh.org/fleetmesh/didcomm"
)

// PIURI and message type.
const (
	PIURI          = "https://didcomm.org/out-of-band/2.0"
	TypeInvitation = PIURI + "/invitation"
)

// Goal codes fleetmesh invitations use.
const (
	GoalMediate = "fleetmesh.mediate"
)

// MaxURLBytes bounds an invitation URL accepted by Parse.
const MaxURLBytes = 8 << 10

// Service is where the inviter accepts DIDComm messages.
type Service struct {
	ID              string   `json:"id"`
	Type            string   `json:"type"`
	ServiceEndpoint Endpoint `json:"serviceEndpoint"`
}

// Endpoint is a DIDCommMessaging service endpoint.
type Endpoint struct {
	URI    string   `json:"uri"`
	Accept []string `json:"accept,omitempty"`
}

// Body is an invitation's body.
type Body struct {
	GoalCode string    `json:"goal_code,omitempty"`
	Goal     string    `json:"goal,omitempty"`
	Accept   []string  `json:"accept"`
	Services []Service `json:"services,omitempty"`
}

// New returns an invitation from did reachable at the given URIs (HTTP
// URLs or libp2p multiaddrs).
func New(did, goalCode, goal string, uris ...string) (*didcomm.Message, error) {
	b := Body{GoalCode: goalCode, Goal: goal, Accept: []string{"didcomm/v2"}}
	for i, u := range uris {
		b.Services = append(b.Services, Service{
			ID:              fmt.Sprintf("%s#didcomm-%d", did, i),
			Type:            "DIDCommMessaging",
			ServiceEndpoint: Endpoint{URI: u, Accept: []string{"didcomm/v2"}},
		})
	}
	m, err := didcomm.NewMessage(TypeInvitation, b)
	if err != nil {
		return nil, err
	}
	m.From = did
	return m, nil
}

// URL encodes inv as base URL plus `?_oob=` and the base64url of the
// plaintext invitation.
func URL(base string, inv *didcomm.Message) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("oob: %w", err)
	}
	raw, err := json.Marshal(inv)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("_oob", base64.RawURLEncoding.EncodeToString(raw))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Parse reads an invitation URL (or a bare invitation JSON) and checks it
// is an invitation with a `from`.
func Parse(s string) (*didcomm.Message, *Body, error) {
	if len(s) > MaxURLBytes {
		return nil, nil, fmt.Errorf("oob: invitation is %d bytes (at most %d)", len(s), MaxURLBytes)
	}
	s = strings.TrimSpace(s)
	raw := []byte(s)
	if !strings.HasPrefix(s, "{") {
		u, err := url.Parse(s)
		if err != nil {
			return nil, nil, fmt.Errorf("oob: %w", err)
		}
		enc := u.Query().Get("_oob")
		if enc == "" {
			return nil, nil, errors.New("oob: URL has no _oob parameter")
		}
		if raw, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "=")); err != nil {
			return nil, nil, fmt.Errorf("oob: _oob is not base64url: %w", err)
		}
	}
	var m didcomm.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, fmt.Errorf("oob: %w", err)
	}
	if m.Type != TypeInvitation || m.ID == "" || m.From == "" {
		return nil, nil, fmt.Errorf("oob: not an invitation with id and from (type %q)", m.Type)
	}
	var b Body
	if err := json.Unmarshal(m.Body, &b); err != nil {
		return nil, nil, fmt.Errorf("oob: body: %w", err)
	}
	return &m, &b, nil
}

// QR renders s as a QR code for a terminal: two modules per character
// with Unicode half blocks, dark on light, with the four-module quiet
// zone scanners need.
func QR(s string) (string, error) {
	code, err := qr.Encode(s, qr.M)
	if err != nil {
		return "", fmt.Errorf("oob: QR: %w", err)
	}
	const quiet = 4
	n := code.Size + 2*quiet
	dark := func(x, y int) bool { return code.Black(x-quiet, y-quiet) }
	var b strings.Builder
	for y := 0; y < n; y += 2 {
		for x := 0; x < n; x++ {
			top, bottom := dark(x, y), y+1 < n && dark(x, y+1)
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// QRModules returns the QR code of s as a square of booleans (true is
// dark), for callers that draw it themselves (a PNG, a phone screen).
func QRModules(s string) ([][]bool, error) {
	code, err := qr.Encode(s, qr.M)
	if err != nil {
		return nil, fmt.Errorf("oob: QR: %w", err)
	}
	out := make([][]bool, code.Size)
	for y := range out {
		out[y] = make([]bool, code.Size)
		for x := range out[y] {
			out[y][x] = code.Black(x, y)
		}
	}
	return out, nil
}
