package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"fleetmesh.org/fleetmesh/didcomm"
)

// ProtocolID is the libp2p stream protocol.
const ProtocolID protocol.ID = "/fleetmesh/didcomm/1.0.0"

// Bounds.
const (
	// MaxFrameBytes is the largest message either binding carries.
	MaxFrameBytes = didcomm.DefaultMaxMessageBytes
	// StreamTimeout bounds one libp2p exchange on the serving side.
	StreamTimeout = 30 * time.Second
)

// Handler answers one packed message: the answer to send back on the same
// connection (nil for none), or an error.
type Handler func(ctx context.Context, packed []byte) ([]byte, error)

// MediaType returns the media type of a packed message from its shape.
func MediaType(packed []byte) string {
	switch {
	case bytes.Contains(packed, []byte(`"ciphertext"`)):
		return didcomm.MediaTypeEncrypted
	case bytes.Contains(packed, []byte(`"signatures"`)), bytes.Contains(packed, []byte(`"payload"`)):
		return didcomm.MediaTypeSigned
	}
	return didcomm.MediaTypePlain
}

// ErrStatus is wrapped by PostHTTP when the receiver answered with an
// error status; the body (a problem report) is returned with it.
var ErrStatus = errors.New("transport: HTTP error status")

// PostHTTP POSTs packed to url and returns the answer body (nil on 202).
// On a 4xx or 5xx it returns the body too, with an error wrapping
// ErrStatus.
func PostHTTP(ctx context.Context, client *http.Client, url string, packed []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(packed))
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	req.Header.Set("Content-Type", MediaType(packed))
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxFrameBytes+1))
	if err != nil {
		return nil, fmt.Errorf("transport: read answer: %w", err)
	}
	if len(body) > MaxFrameBytes {
		return nil, fmt.Errorf("transport: answer larger than %d bytes", MaxFrameBytes)
	}
	if resp.StatusCode >= 400 {
		return body, fmt.Errorf("%w %d from %s: %s", ErrStatus, resp.StatusCode, url, strings.TrimSpace(string(body)))
	}
	if resp.StatusCode == http.StatusAccepted || len(body) == 0 {
		return nil, nil
	}
	return body, nil
}

// WriteFrame writes one length-prefixed frame.
func WriteFrame(w io.Writer, b []byte) error {
	if len(b) > MaxFrameBytes {
		return fmt.Errorf("transport: frame of %d bytes exceeds %d", len(b), MaxFrameBytes)
	}
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(len(b)))
	if _, err := w.Write(hdr[:n]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// ReadFrame reads one frame of at most max bytes.
func ReadFrame(r *bufio.Reader, max int) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("transport: frame length: %w", err)
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("transport: frame of %d bytes exceeds %d", n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("transport: frame body: %w", err)
	}
	return b, nil
}

// Stream is what the stream binding runs on: a libp2p stream, or an iroh
// bi-stream under the ALPN of ProtocolID's name (spec/iroh.md). The
// framing is the same on both.
type Stream interface {
	io.ReadWriter
	// CloseWrite finishes the sending half.
	CloseWrite() error
	// Reset abandons the stream in both directions.
	Reset() error
	SetDeadline(time.Time) error
}

// Serve answers one message on s: one frame in, the handler's answer as
// one frame out (an empty frame for none). ctx bounds the handler, which
// gets at most StreamTimeout; the caller closes s.
func Serve(ctx context.Context, s Stream, handle Handler) {
	_ = s.SetDeadline(time.Now().Add(StreamTimeout))
	in, err := ReadFrame(bufio.NewReader(s), MaxFrameBytes)
	if err != nil {
		_ = s.Reset()
		return
	}
	sctx, cancel := context.WithTimeout(ctx, StreamTimeout)
	defer cancel()
	out, err := handle(sctx, in)
	if err != nil && out == nil {
		_ = s.Reset()
		return
	}
	if err := WriteFrame(s, out); err != nil {
		_ = s.Reset()
	}
}

// Exchange sends packed on s, a stream just opened to a node, and returns
// its answer (nil when it sent an empty frame). s is reset when ctx ends
// first or the exchange fails; the caller closes it.
func Exchange(ctx context.Context, s Stream, packed []byte) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := WriteFrame(s, packed); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("transport: send: %w", err)
	}
	if err := s.CloseWrite(); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("transport: send: %w", err)
	}
	out, err := ReadFrame(bufio.NewReader(s), MaxFrameBytes)
	if err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("transport: answer: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// ServeLibp2p registers the stream protocol on h. ctx bounds the handler
// calls (cancel it, or RemoveLibp2p, at shutdown); each stream is handled
// on the goroutine libp2p gives it and ends within StreamTimeout.
func ServeLibp2p(ctx context.Context, h host.Host, handle Handler) {
	h.SetStreamHandler(ProtocolID, func(s network.Stream) {
		defer s.Close()
		Serve(ctx, s, handle)
	})
}

// RemoveLibp2p unregisters the stream protocol.
func RemoveLibp2p(h host.Host) { h.RemoveStreamHandler(ProtocolID) }

// SendLibp2p opens a stream to p, sends packed and returns the answer (nil
// when the peer sent an empty frame).
func SendLibp2p(ctx context.Context, h host.Host, p peer.ID, packed []byte) ([]byte, error) {
	s, err := h.NewStream(ctx, p, ProtocolID)
	if err != nil {
		return nil, fmt.Errorf("transport: open stream to %s: %w", p, err)
	}
	defer s.Close()
	out, err := Exchange(ctx, s, packed)
	if err != nil {
		return nil, fmt.Errorf("transport: %s: %w", p, err)
	}
	return out, nil
}
