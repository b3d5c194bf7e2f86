package iroh

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// TestStreamBounds: the helper resets an inbound stream over a peer's
// per-protocol bound and tells the node, which counts the refusal with
// the remote's id; Dial refuses a stream past the endpoint's own total
// (its file budget share) until one closes; a banned endpoint's streams
// are refused.
func TestStreamBounds(t *testing.T) {
	release := make(chan struct{})
	hold := func(s *Stream) {
		defer s.Close()
		s.Write([]byte("held"))
		<-release
	}
	var mu sync.Mutex
	refusals := map[string]uint64{}
	serverKey, _ := identity.GenerateKey()
	ready := make(chan Info, 8)
	srv, err := Start(Config{
		Key: serverKey, Node: "node", HelperDir: helperDir(t), SocketDir: t.TempDir(),
		Bind:     []string{"127.0.0.1:0"},
		Handlers: map[string]Handler{testALPN: hold},
		Limits:   Limits{StreamsPerProtocol: 1},
		OnReady:  func(i Info) { ready <- i },
		OnRefused: func(remote, reason string, n uint64) {
			mu.Lock()
			refusals[remote+" "+reason] += n
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	defer close(release)
	var info Info
	select {
	case info = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("the helper did not serve")
	}
	clientKey, _ := identity.GenerateKey()
	cli, _ := startEndpointWith(t, clientKey, Limits{Streams: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	to := Addr{ID: info.ID, Addrs: []string{loopback(info.Addrs)}}
	read := func(s *Stream) (string, error) {
		s.Write([]byte("x"))
		s.SetReadDeadline(time.Now().Add(20 * time.Second))
		b := make([]byte, 4)
		_, err := io.ReadFull(s, b)
		return string(b), err
	}
	first, err := cli.Dial(ctx, to, testALPN)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read(first); err != nil || got != "held" {
		t.Fatalf("first stream: %q %v", got, err)
	}
	second, err := cli.Dial(ctx, to, testALPN)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read(second); err == nil {
		t.Fatalf("a second stream on one protocol was served (%q); the bound is 1", got)
	}
	if _, err := cli.Dial(ctx, to, testALPN); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third stream past the client's bound of 2: %v, want ErrBusy", err)
	}
	second.Close()
	if third, err := cli.Dial(ctx, to, testALPN); err != nil {
		t.Fatalf("after one closed: %v", err)
	} else {
		third.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := refusals[clientKey.EndpointID()+" "+RefusedProtocolStreams]
		mu.Unlock()
		if n >= 1 && srv.Stats().Refused[RefusedProtocolStreams] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals %v, stats %v: want the client's protocol_streams", refusals, srv.Stats().Refused)
		}
		time.Sleep(100 * time.Millisecond)
	}

	first.Close()
	srv.Ban(clientKey.EndpointID(), time.Now().Add(time.Minute))
	if s, err := cli.Dial(ctx, to, testALPN); err == nil {
		if got, err := read(s); err == nil {
			t.Fatalf("a banned endpoint's stream was served: %q", got)
		}
		s.Close()
	}
}
