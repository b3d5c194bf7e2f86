package meshsync

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestSilenceRetries walks one peer through the silence rules: left out
// once it did not answer, asked again by one lookup when its retry comes,
// then left out twice as long, and back at once when it answers.
func TestSilenceRetries(t *testing.T) {
	var s silence
	p := peer.ID("p")
	t0 := time.Unix(1_800_000_000, 0)
	steps := []struct {
		name string
		do   func(now time.Time)
		at   time.Duration // after t0
		skip bool
	}{
		{name: "never silent", at: 0, skip: false},
		{name: "silent", do: func(now time.Time) { s.mark(p, now) }, at: time.Second, skip: true},
		{name: "before its retry", at: silenceRetry, skip: true},
		{name: "its retry: asked once", at: silenceRetry + 2*time.Second, skip: false},
		{name: "the retry's concurrent lookups", at: silenceRetry + 2*time.Second, skip: true},
		{name: "the retry failed", do: func(now time.Time) { s.mark(p, now) }, at: silenceRetry + 3*time.Second, skip: true},
		{name: "the doubled wait has not passed", at: 2 * silenceRetry, skip: true},
		{name: "the doubled wait passed", at: 3*silenceRetry + 3*time.Second, skip: false},
		{name: "it answered", do: func(time.Time) { s.answered(p) }, at: 3*silenceRetry + 4*time.Second, skip: false},
	}
	for _, st := range steps {
		now := t0.Add(st.at)
		if st.do != nil {
			st.do(now)
		}
		if got := s.skip(p, now); got != st.skip {
			t.Fatalf("%s: skip = %v, want %v", st.name, got, st.skip)
		}
	}
	for i := range maxSilent + 10 {
		s.mark(peer.ID(fmt.Sprint(i)), t0.Add(time.Duration(i)))
	}
	if n := s.count(); n != maxSilent {
		t.Fatalf("%d peers remembered as silent, want the bound %d", n, maxSilent)
	}
}

// TestLookupLeavesStalledPeers: a peer that takes a lookup's stream and
// never answers (a killed process behind a connection that still looks
// open) holds a lookup up only for the grace after the live peer has
// answered, not for the caller's whole deadline, and is not asked by the
// next lookups; once it opens a session of its own it is asked again.
func TestLookupLeavesStalledPeers(t *testing.T) {
	mn, nodes := newMesh(t, 3)
	ids := mn.Peers()
	var opened atomic.Int64
	mn.Hosts()[2].SetStreamHandler(protocol.ID(ProtocolID), func(s network.Stream) {
		opened.Add(1)
		io.Copy(io.Discard, s) // reads the REQ, never answers
	})
	k, _ := nostr.GenerateSecretKey()
	ev := signed(t, k, 100, 1, "at node 1")
	nodes[1].add(t, ev)
	lookup := func() (asked []peer.ID, found int, ctxErr error) {
		// The deadline is the bound the wait must stay far below.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		asked = nodes[0].svc.Lookup(ctx, ids[1:], nostr.Filter{Authors: [][32]byte{k.PubKey()}}, 10, func(*nostr.Event) { found++ })
		return asked, found, ctx.Err()
	}
	asked, found, err := lookup()
	if !slices.Equal(asked, ids[1:]) || found != 1 || err != nil {
		t.Fatalf("first lookup asked %v, found %d, deadline %v; want both asked, 1 found, returned before the deadline", asked, found, err)
	}
	for deadline := time.Now().Add(30 * time.Second); opened.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled peer never saw the first lookup")
		}
	}
	for range 3 {
		if asked, found, _ := lookup(); !slices.Equal(asked, ids[1:2]) || found != 1 {
			t.Fatalf("a later lookup asked %v and found %d; want only the live peer, 1 found", asked, found)
		}
	}
	// The stalled peer opens a session here: it is answering again.
	if _, err := nodes[2].svc.SyncWith(context.Background(), ids[0], nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	if asked, _, err := lookup(); !slices.Equal(asked, ids[1:]) || err != nil {
		t.Fatalf("after its session the lookup asked %v (deadline %v), want both", asked, err)
	}
}
