package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/discoverfeatures"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/mediator"
	"fleetmesh.org/fleetmesh/didcomm/oob"
	"fleetmesh.org/fleetmesh/didcomm/problemreport"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/didcomm/trustping"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
)

// TypeEmpty is the empty message (https://didcomm.org/empty/1.0/empty),
// which a leaf sends to open a return route.
const TypeEmpty = "https://didcomm.org/empty/1.0/empty"

// MediatorDir is the subdirectory of the Service's directory that holds the
// mediation queue.
const MediatorDir = "mediator"

// Service is a node's DIDComm endpoint. It is safe for concurrent use.
type Service struct {
	did      string
	packer   *didcomm.Packer
	unpacker *didcomm.Unpacker
	mediator *mediator.Mediator
	limits   *limiter
	refusals [refusalKinds]refusal // for limits, packed once
	proxies  clientaddr.Proxies    // set before serving; read-only after
	log      *slog.Logger
	features []discoverfeatures.Disclosure

	ctx    context.Context // ends at Close; bounds libp2p stream handling
	cancel context.CancelFunc

	mu       sync.Mutex
	hosts    []host.Host
	handlers map[string]Handler // by protocol identifier (protocols.go)
	sender   Sender             // how Request sends; nil: libp2p (protocols.go)
	meter    *meter.Meter       // counts pickup deliveries (protocols.go)
	closed   bool
}

// New returns the Service of the node with this key, keeping its state
// (the mediation queue) under dir.
func New(key *identity.Key, dir string, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	secrets, err := didcomm.SecretsFromKey(key)
	if err != nil {
		return nil, err
	}
	med, err := mediator.Open(filepath.Join(dir, MediatorDir), key.DID(), mediator.DefaultConfig())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := didcomm.DIDKeyResolver{}
	s := &Service{
		did:    key.DID(),
		packer: &didcomm.Packer{Secrets: secrets, Resolver: res},
		unpacker: &didcomm.Unpacker{
			Secrets: secrets, Resolver: res, Limits: didcomm.DefaultLimits(),
			Replay: didcomm.NewReplayGuard(didcomm.DefaultReplayWindow, didcomm.DefaultReplayEntries),
		},
		mediator: med,
		log:      log.With("component", "didcomm"),
		features: Features(),
		ctx:      ctx,
		cancel:   cancel,
	}
	if err := s.SetLimits(DefaultLimits()); err != nil {
		cancel()
		med.Close()
		return nil, err
	}
	return s, nil
}

// Features lists what the Service discloses: every protocol it speaks with
// its role, and the headers it honours.
func Features() []discoverfeatures.Disclosure {
	p := func(id string, roles ...string) discoverfeatures.Disclosure {
		return discoverfeatures.Disclosure{FeatureType: discoverfeatures.FeatureProtocol, ID: id, Roles: roles}
	}
	return []discoverfeatures.Disclosure{
		p(trustping.PIURI, "sender", "receiver"),
		p(discoverfeatures.PIURI, "requester", "responder"),
		p(problemreport.PIURI, "notifier", "notified"),
		p(routing.PIURI, "mediator"),
		p(mediation.PIURIMediation, "mediator"),
		p(mediation.PIURIPickup, "mediator"),
		p(oob.PIURI, "sender"),
		p(mediation.PIURIPush, "mediator"),
		p("https://didcomm.org/empty/1.0"),
		{FeatureType: discoverfeatures.FeatureHeader, ID: "return_route"},
	}
}

// DID returns the node's DID.
func (s *Service) DID() string { return s.did }

// Mediates reports whether this node mediates for did (did is one of its
// leaves).
func (s *Service) Mediates(did string) bool { return s.mediator.Mediates(did) }

// Close stops serving libp2p streams and closes the mediation queue.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	hosts := s.hosts
	s.hosts = nil
	s.mu.Unlock()
	for _, h := range hosts {
		transport.RemoveLibp2p(h)
	}
	s.cancel()
	return s.mediator.Close()
}

// AttachLibp2p serves the DIDComm stream protocol on h until Close.
func (s *Service) AttachLibp2p(h host.Host) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.hosts = append(s.hosts, h)
	transport.ServeLibp2p(s.ctx, h, s.Handle)
}

// TrustProxies names the reverse proxies in front of the service, so that
// its per-address limits key a forwarded request by the client it came
// from (package clientaddr). Call it before serving.
func (s *Service) TrustProxies(p clientaddr.Proxies) { s.proxies = p }

// ServeHTTP serves POSTed DIDComm messages and, on GET, the node's
// out-of-band invitation.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A browser leaf paired with a home on another origin posts here from
	// its page: the endpoint is public and every message authenticates
	// itself, and no cookie or credential rides on the request, so any
	// origin may call it.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
		w.Header().Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodGet:
		s.serveInvitation(w, r)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST, OPTIONS")
		http.Error(w, "use POST with a DIDComm message, or GET for the invitation", http.StatusMethodNotAllowed)
		return
	}
	addr := s.proxies.OfRequest(r).Narrow
	release, refused, wait := s.limits.admit(addr)
	if release == nil {
		// An address over its own bounds waits for its answer (at most
		// maxTarpit), so a flood on one connection is slowed, not just
		// refused; a busy endpoint answers at once.
		if wait > 0 {
			t := time.NewTimer(min(wait, maxTarpit))
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
		}
		s.refusals[refused].write(w)
		return
	}
	defer release()
	// A body that trickles in holds a slot: it gets a deadline.
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.limits.cfg.BodyTimeout))
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case didcomm.MediaTypeEncrypted, didcomm.MediaTypeSigned, didcomm.MediaTypePlain:
	default:
		s.writeProblem(w, http.StatusUnsupportedMediaType, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("Content-Type %q is not a DIDComm media type", mt)})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, transport.MaxFrameBytes))
	if err != nil {
		s.writeProblem(w, http.StatusRequestEntityTooLarge, &didcomm.Problem{Code: didcomm.CodeTooBig, Err: fmt.Errorf("message larger than %d bytes", transport.MaxFrameBytes)})
		return
	}
	reply, herr := s.Handle(withSenderAddr(r.Context(), addr), body)
	if statusOf(herr) == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", retryAfter)
	}
	switch {
	case reply == nil && herr == nil:
		w.WriteHeader(http.StatusAccepted)
		return
	case herr != nil:
		w.Header().Set("Content-Type", transport.MediaType(reply))
		w.WriteHeader(statusOf(herr))
	default:
		w.Header().Set("Content-Type", transport.MediaType(reply))
	}
	_, _ = w.Write(reply)
}

func statusOf(err error) int {
	var p *didcomm.Problem
	if errors.As(err, &p) {
		switch p.Code {
		case didcomm.CodeTooBig:
			return http.StatusRequestEntityTooLarge
		case didcomm.CodeInternal:
			return http.StatusInternalServerError
		case didcomm.CodeQueueFull:
			return http.StatusServiceUnavailable
		case didcomm.CodeRateLimited:
			return http.StatusTooManyRequests
		}
	}
	return http.StatusBadRequest
}

func (s *Service) writeProblem(w http.ResponseWriter, status int, err error) {
	s.log.Info("refused DIDComm message", "err", err)
	s.writeReport(w, status, err)
}

// writeReport answers with a problem report for err, unlogged: a flood's
// refusals must not become a flood of log lines.
func (s *Service) writeReport(w http.ResponseWriter, status int, err error) {
	pr, perr := problemreport.New(err, s.did, "", "")
	if perr != nil {
		http.Error(w, err.Error(), status)
		return
	}
	out, _ := s.packer.Pack(pr, didcomm.PackOptions{Mode: didcomm.ModePlaintext})
	w.Header().Set("Content-Type", didcomm.MediaTypePlain)
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func (s *Service) serveInvitation(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	endpoint := scheme + "://" + r.Host + r.URL.Path
	inv, err := oob.New(s.did, oob.GoalMediate, "DIDComm with this fleetmesh node; it mediates for leaves", endpoint)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out, err := s.packer.Pack(inv, didcomm.PackOptions{Mode: didcomm.ModePlaintext})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", didcomm.MediaTypePlain)
	_, _ = w.Write(out)
}

// HandleFrom is Handle for a message from a sender that the transport
// authenticated but that no per-peer bound of its own covers (a peer over
// iroh: key "iroh:ENDPOINT_ID"): the /didcomm endpoint's per-address
// limits apply with from as the address (spec/limits.md). Over them the
// answer is a problem report with code e.p.me.res.rate-limited, and the
// error says so.
func (s *Service) HandleFrom(ctx context.Context, from string, packed []byte) ([]byte, error) {
	release, refused, _ := s.limits.admit(from)
	if release == nil {
		_, p := s.limits.problem(refused)
		return s.problem(nil, p), p
	}
	defer release()
	return s.Handle(withSenderAddr(ctx, from), packed)
}

// Handle processes one packed message and returns the packed answer for
// the same connection (nil when there is none). When the message is
// refused, the answer is a problem report and the error says why.
func (s *Service) Handle(ctx context.Context, packed []byte) ([]byte, error) {
	u, err := s.unpacker.Unpack(packed)
	if err != nil {
		s.log.Info("refused DIDComm message", "err", err)
		return s.problem(nil, err), err
	}
	msg := u.Message
	reply, err := s.dispatch(ctx, u)
	if err != nil {
		s.log.Info("DIDComm message refused", "type", msg.Type, "id", msg.ID, "from", msg.From, "err", err)
		return s.problem(u, err), err
	}
	if reply == nil || msg.ReturnRoute == "none" {
		return nil, nil
	}
	out, err := s.pack(u, reply)
	if err != nil {
		s.log.Error("packing DIDComm answer", "type", reply.Type, "err", err)
		return s.problem(u, err), err
	}
	return out, nil
}

func (s *Service) dispatch(ctx context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
	msg := u.Message
	switch msg.Type {
	case trustping.TypePing:
		return trustping.Answer(msg, s.did)
	case discoverfeatures.TypeQueries:
		return discoverfeatures.Answer(msg, s.did, s.features)
	case trustping.TypeResponse, discoverfeatures.TypeDisclose, TypeEmpty:
		return nil, nil
	case problemreport.Type:
		b, err := problemreport.Parse(msg)
		if err != nil {
			return nil, err
		}
		// A problem report is never answered with another, or two
		// nodes could bounce reports forever.
		s.log.Info("problem report received", "from", msg.From, "code", b.Code, "comment", b.Comment, "pthid", msg.Pthid)
		return nil, nil
	}
	if msg.Type == routing.TypeForward {
		if err := s.limits.forward(senderAddr(ctx), msg); err != nil {
			return nil, err
		}
	}
	if mediator.Handles(msg.Type) {
		reply, err := s.mediator.Handle(u)
		s.meterMediation(u, reply, err)
		return reply, err
	}
	if h := s.handler(msg.Type); h != nil {
		return h(ctx, u)
	}
	return nil, &didcomm.Problem{Code: didcomm.CodeUnsupportedType, Err: fmt.Errorf("message type %s is not supported (ask with discover-features)", msg.Type)}
}

// pack encrypts an answer to the sender it proved; an unauthenticated
// sender has no key to encrypt to, so it gets plaintext.
func (s *Service) pack(u *didcomm.Unpacked, reply *didcomm.Message) ([]byte, error) {
	mode := didcomm.ModePlaintext
	if u != nil && u.Authenticated {
		mode = didcomm.ModeAuthcrypt
		reply.To = []string{u.Message.From}
	} else {
		reply.To = nil
	}
	return s.packer.Pack(reply, didcomm.PackOptions{Mode: mode})
}

// problem returns the packed problem report for err; never nil.
func (s *Service) problem(u *didcomm.Unpacked, err error) []byte {
	if u != nil && u.Message.Type == problemreport.Type {
		return []byte{} // no report about a report: an empty answer
	}
	thid := ""
	if u != nil {
		thid = u.Message.Thread()
	}
	pr, perr := problemreport.New(err, s.did, "", thid)
	if perr == nil {
		if out, perr := s.pack(u, pr); perr == nil {
			return out
		}
	}
	// Packing a report should not fail; if it does, say so in plaintext
	// rather than go silent.
	return []byte(fmt.Sprintf(`{"id":%q,"type":%q,"body":{"code":%q,"comment":"could not build the report"}}`, didcomm.NewID(), problemreport.Type, didcomm.CodeInternal))
}
