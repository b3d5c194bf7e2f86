package meshsync

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	msgio "github.com/libp2p/go-msgio"

	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
)

// TestMeteringAndGrantRefusal: both ends of a sync session and of a
// lookup count the same events, and a REQ the Allow hook refuses is
// closed with the hook's reason (a grant's refusal).
func TestMeteringAndGrantRefusal(t *testing.T) {
	mn, nodes := newMesh(t, 2)
	hs := mn.Hosts()
	meters := []*meter.Meter{meter.New(hs[0].ID(), time.Hour, time.Now()), meter.New(hs[1].ID(), time.Hour, time.Now())}
	refuse := false
	for i, n := range nodes {
		n.svc.Close()
		n.svc = New(hs[i], n.local, n.pol, Config{Meter: meters[i], Allow: func(peer.ID) error {
			if refuse {
				return errors.New("rate-limited: over grant abc (5 events per 3600s window, 5 used)")
			}
			return nil
		}}, nil)
	}
	k, _ := nostr.GenerateSecretKey()
	for i := range 5 {
		nodes[1].add(t, signed(t, k, int64(100+i), 1, "held by 1"))
	}
	nodes[0].add(t, signed(t, k, 200, 1, "held by 0"))
	if _, err := nodes[0].svc.SyncWith(context.Background(), hs[1].ID(), nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	var got int
	nodes[0].svc.Lookup(context.Background(), []peer.ID{hs[1].ID()}, nostr.Filter{Authors: [][32]byte{k.PubKey()}}, 10, func(*nostr.Event) { got++ })
	s0 := meters[0].Current().Sides()[hs[1].ID()]
	s1 := meters[1].Current().Sides()[hs[0].ID()]
	if s0.Received != s1.Gave || s0.Gave != s1.Received {
		t.Fatalf("the two ends disagree: 0 saw %+v, 1 saw %+v", s0, s1)
	}
	if s1.Gave.Events != 5+uint64(got) || s1.Received.Events != 1 {
		t.Fatalf("1 gave %d events (5 fetched, %d looked up) and received %d (1 pushed)", s1.Gave.Events, got, s1.Received.Events)
	}
	// Refused: the REQ is closed with the reason.
	refuse = true
	str, err := hs[0].NewStream(context.Background(), hs[1].ID(), protocol.ID(ProtocolID))
	if err != nil {
		t.Fatal(err)
	}
	defer str.Close()
	r, w := msgio.NewVarintReaderSize(str, MaxFrameBytes), msgio.NewVarintWriter(str)
	if err := writeFrame(w, "REQ", "x", nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	typ, parts, err := readFrame(r)
	if err != nil || typ != "CLOSED" || len(parts) < 3 || !strings.Contains(string(parts[2]), "over grant abc") {
		t.Fatalf("refused REQ got %s %s %v", typ, parts, err)
	}
}
