package iroh

import (
	"bufio"
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/identity"
)

// Stream is one iroh bi-stream, reached through its own connection to the
// helper. Close ends both directions; CloseWrite finishes the sending half
// (QUIC's FIN) and leaves the receiving half open.
type Stream struct {
	c      *net.UnixConn
	r      *bufio.Reader
	alpn   string
	remote string
	// release gives back the stream's slot in the endpoint's bounds, once.
	release func()
	once    sync.Once
}

// Read reads what the remote endpoint sent.
func (s *Stream) Read(p []byte) (int, error) { return s.r.Read(p) }

// Write sends p to the remote endpoint.
func (s *Stream) Write(p []byte) (int, error) { return s.c.Write(p) }

// Close ends the stream in both directions.
func (s *Stream) Close() error {
	err := s.c.Close()
	s.once.Do(func() {
		if s.release != nil {
			s.release()
		}
	})
	return err
}

// CloseWrite finishes the sending half.
func (s *Stream) CloseWrite() error { return s.c.CloseWrite() }

// Reset abandons the stream. A Unix socket has no reset of its own, so
// the helper sees a close.
func (s *Stream) Reset() error { return s.Close() }

// SetDeadline bounds reads and writes.
func (s *Stream) SetDeadline(t time.Time) error { return s.c.SetDeadline(t) }

// SetReadDeadline bounds reads.
func (s *Stream) SetReadDeadline(t time.Time) error { return s.c.SetReadDeadline(t) }

// SetWriteDeadline bounds writes.
func (s *Stream) SetWriteDeadline(t time.Time) error { return s.c.SetWriteDeadline(t) }

// ALPN is the protocol the stream's connection negotiated.
func (s *Stream) ALPN() string { return s.alpn }

// Remote is the remote EndpointId (64 hex digits), authenticated by iroh's
// handshake.
func (s *Stream) Remote() string { return s.remote }

// RemotePeer is the remote endpoint as a libp2p PeerID: the same Ed25519
// key, so a peer is one identity on both transports.
func (s *Stream) RemotePeer() (peer.ID, error) { return PeerID(s.remote) }

// PeerID converts an EndpointId to the PeerID of the same key.
func PeerID(endpointID string) (peer.ID, error) {
	pub, err := identity.PublicKeyFromEndpointID(endpointID)
	if err != nil {
		return "", err
	}
	return identity.PeerIDFromPublicKey(pub)
}

// EndpointID converts a PeerID to the EndpointId of the same key.
func EndpointID(p peer.ID) (string, error) {
	pub, err := identity.PublicKeyFromPeerID(p)
	if err != nil {
		return "", err
	}
	return identity.EndpointIDFromPublicKey(pub), nil
}
