package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/discoverfeatures"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/problemreport"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
)

// SetMeter meters mediation: the messages a pickup delivers to a leaf are
// mediation service given to it, and a forward queued is mediation given
// to its sender when the sender is known (an authcrypted forward; a
// routing forward is usually anoncrypt, and then nobody is counted).
// Call it before the Service serves.
func (s *Service) SetMeter(m *meter.Meter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meter = m
}

// SetQueueGrant sets the mediator's check before it queues a forward for
// a leaf (mediator.Mediator.SetQueueGrant).
func (s *Service) SetQueueGrant(f func(leaf string, queued int) error) {
	s.mediator.SetQueueGrant(f)
}

// meterMediation counts what the mediator gave: a delivery's messages to
// the leaf that picked them up, a queued forward to its sender.
func (s *Service) meterMediation(u *didcomm.Unpacked, reply *didcomm.Message, err error) {
	if s.meter == nil || err != nil || !u.Authenticated {
		return
	}
	n := 0
	switch {
	case u.Message.Type == routing.TypeForward:
		n = 1
	case reply != nil && reply.Type == mediation.TypeDelivery:
		n = len(reply.Attachments)
	}
	if p, perr := identity.PeerIDFromDID(u.Message.From); perr == nil && n > 0 {
		s.meter.Record(p, meter.MediationMessages, meter.Gave, uint64(n))
	}
}

// Handler answers one message of a protocol another package implements
// (fleetmesh's own, under https://fleetmesh.org/protocols/): the answer to
// send back on the same connection (nil for none), or an error, which the
// agent turns into a problem report (a *didcomm.Problem keeps its code).
type Handler func(ctx context.Context, u *didcomm.Unpacked) (*didcomm.Message, error)

// Register routes every message type under piuri (the protocol's
// identifier, without a trailing slash) to h and discloses the protocol
// with its roles. Call it before the Service serves.
func (s *Service) Register(piuri string, h Handler, roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handlers == nil {
		s.handlers = map[string]Handler{}
	}
	s.handlers[piuri] = h
	s.features = append(s.features, discoverfeatures.Disclosure{FeatureType: discoverfeatures.FeatureProtocol, ID: piuri, Roles: roles})
}

// handler returns the registered handler for a message type.
func (s *Service) handler(typ string) Handler {
	i := strings.LastIndexByte(typ, '/')
	if i < 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handlers[typ[:i]]
}

// ErrNoAnswer is returned by Request when the peer answered with nothing.
var ErrNoAnswer = errors.New("agent: no answer")

// Sender sends one packed message to the node p and returns its answer on
// the same stream (nil for none): how Request reaches other nodes. The
// node supplies one that picks a transport (libp2p or iroh) per peer.
type Sender func(ctx context.Context, p peer.ID, packed []byte) ([]byte, error)

// SetSender makes Request send with f; until then, and with nil, it sends
// over the libp2p binding on the first attached host.
func (s *Service) SetSender(f Sender) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sender = f
}

// send is the Sender in use.
func (s *Service) send(ctx context.Context, p peer.ID, packed []byte) ([]byte, error) {
	s.mu.Lock()
	f := s.sender
	var h host.Host
	if len(s.hosts) > 0 {
		h = s.hosts[0]
	}
	s.mu.Unlock()
	switch {
	case f != nil:
		return f(ctx, p, packed)
	case h != nil:
		return transport.SendLibp2p(ctx, h, p, packed)
	}
	return nil, errors.New("agent: no libp2p host attached and no sender set")
}

// Request sends m from this node to the node whose DID is to, authcrypted
// over the stream binding (the Sender picks the transport), asking for
// the answer on the same stream, and returns the answer. A problem report
// comes back as a *didcomm.Problem with the peer's code and comment.
func (s *Service) Request(ctx context.Context, to string, m *didcomm.Message) (*didcomm.Message, error) {
	p, err := identity.PeerIDFromDID(to)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	m.From, m.To, m.ReturnRoute = s.did, []string{to}, "all"
	packed, err := s.packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, p, packed)
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, ErrNoAnswer
	}
	u, err := s.unpacker.Unpack(raw)
	if err != nil {
		return nil, fmt.Errorf("agent: answer to %s: %w", m.Type, err)
	}
	r := u.Message
	if r.Type == problemreport.Type {
		b, err := problemreport.Parse(r)
		if err != nil {
			return nil, err
		}
		return nil, &didcomm.Problem{Code: b.Code, Err: fmt.Errorf("%s refused %s: %s", to, m.Type, b.Comment)}
	}
	if !u.Authenticated || r.From != to {
		return nil, &didcomm.Problem{Code: didcomm.CodeSenderMismatch, Err: fmt.Errorf("answer to %s is not from %s", m.Type, to)}
	}
	return r, nil
}
