package compute

import (
	"encoding/base64"
	"fmt"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

// Sealed is the body of a sealed payload (TypeSealed): the job it
// belongs to, which way it goes ("input" or "output"), and the bytes,
// base64.
type Sealed struct {
	JobID string `json:"job_id"`
	Kind  string `json:"kind"`
	Data  string `json:"data"`
}

// Kinds of sealed payload.
const (
	KindInput  = "input"
	KindOutput = "output"
)

// Sealer seals a job's input and output end to end: an authcrypt JWE
// from this node to the one other party, carried inside the outer job
// message. Whoever carries the outer message (a relaying node, a
// mediator, anything between) sees the JWE only; the outer envelope is
// also authcrypted hop by hop, but the sealed payload does not depend
// on that.
type Sealer struct {
	did      string
	packer   *didcomm.Packer
	unpacker *didcomm.Unpacker
}

// NewSealer makes the sealer of the node with key k.
func NewSealer(k *identity.Key) (*Sealer, error) {
	sec, err := didcomm.SecretsFromKey(k)
	if err != nil {
		return nil, err
	}
	res := didcomm.DIDKeyResolver{}
	return &Sealer{did: k.DID(), packer: &didcomm.Packer{Secrets: sec, Resolver: res},
		unpacker: &didcomm.Unpacker{Secrets: sec, Resolver: res, Limits: didcomm.DefaultLimits()}}, nil
}

// Seal encrypts data of kind for the DID to, bound to jobID.
func (s *Sealer) Seal(to, jobID, kind string, data []byte) ([]byte, error) {
	m, err := didcomm.NewMessage(TypeSealed, Sealed{JobID: jobID, Kind: kind, Data: base64.StdEncoding.EncodeToString(data)})
	if err != nil {
		return nil, err
	}
	m.To = []string{to}
	return s.packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
}

// Open decrypts a sealed payload, checking it comes from the DID from,
// for job jobID, of kind, and holds at most max bytes.
func (s *Sealer) Open(sealed []byte, from, jobID, kind string, max int) ([]byte, error) {
	u, err := s.unpacker.Unpack(sealed)
	if err != nil {
		return nil, fmt.Errorf("compute: sealed %s: %w", kind, err)
	}
	if !u.Authenticated || u.Mode != didcomm.ModeAuthcrypt || u.Message.From != from {
		return nil, &didcomm.Problem{Code: didcomm.CodeSenderMismatch, Err: fmt.Errorf("compute: sealed %s is not authcrypted by %s", kind, from)}
	}
	b, err := decode[Sealed](u.Message, TypeSealed)
	if err != nil {
		return nil, err
	}
	if b.JobID != jobID || b.Kind != kind {
		return nil, malformed("sealed payload is %s of job %.40q, want %s of job %s", b.Kind, b.JobID, kind, jobID)
	}
	if base64.StdEncoding.DecodedLen(len(b.Data)) > max+2 {
		return nil, &didcomm.Problem{Code: didcomm.CodeTooBig, Err: fmt.Errorf("compute: sealed %s larger than %d bytes", kind, max)}
	}
	data, err := base64.StdEncoding.DecodeString(b.Data)
	if err != nil {
		return nil, malformed("sealed %s: not base64: %v", kind, err)
	}
	if len(data) > max {
		return nil, &didcomm.Problem{Code: didcomm.CodeTooBig, Err: fmt.Errorf("compute: sealed %s larger than %d bytes", kind, max)}
	}
	return data, nil
}
