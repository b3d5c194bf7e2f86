package meshsync

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Stream is one sync stream, over libp2p or over another transport that
// carries the same frames (iroh, spec/iroh.md).
type Stream interface {
	io.ReadWriteCloser
	SetDeadline(time.Time) error
	Reset() error
}

// Dialer opens a sync stream to p over whichever transport reaches it. It
// returns libp2p's stream when it has nothing better.
type Dialer func(ctx context.Context, p peer.ID) (Stream, error)

// SetDialer replaces how sessions and lookups open streams; nil restores
// libp2p alone. Call it before the service is used.
func (s *Service) SetDialer(d Dialer) { s.dial = d }

// Libp2pStream opens a sync stream to p over libp2p: what a Dialer falls
// back to.
func (s *Service) Libp2pStream(ctx context.Context, p peer.ID) (Stream, error) {
	str, err := s.h.NewStream(ctx, p, protocol.ID(ProtocolID))
	if err != nil {
		return nil, fmt.Errorf("meshsync: open stream to %s: %w", p, err)
	}
	return str, nil
}

func (s *Service) open(ctx context.Context, p peer.ID) (Stream, error) {
	if s.dial != nil {
		return s.dial(ctx, p)
	}
	return s.Libp2pStream(ctx, p)
}

// openBound opens a stream to p that lives no longer than ctx: it takes
// ctx's deadline, and ctx's end resets it, which unblocks a read from a
// slow peer. done closes the stream and drops the reset.
func (s *Service) openBound(ctx context.Context, p peer.ID) (str Stream, done func(), err error) {
	str, err = s.open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		str.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { str.Reset() })
	return str, func() { stop(); str.Close() }, nil
}

// ServeStream answers one session from remote on a stream another
// transport accepted; it returns when the session ends and closes str.
func (s *Service) ServeStream(str Stream, remote peer.ID) { s.serveOn(str, remote) }

func (s *Service) serve(str network.Stream) { s.serveOn(str, str.Conn().RemotePeer()) }
