package meshsync

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	msgio "github.com/libp2p/go-msgio"

	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
)

// quotas is a grant check as package accounting's: a quota per service of
// what the meter says was given this window (a missing service is
// unlimited).
type quotas struct {
	m     *meter.Meter
	quota map[meter.Service]uint64
}

func (q *quotas) allow(p peer.ID, s meter.Service, n uint64) error {
	if lim, ok := q.quota[s]; ok && q.m.Used(p, s)+n > lim {
		return fmt.Errorf("rate-limited: over grant abc (%d %s per 3600s window, %d used)", lim, s, q.m.Used(p, s))
	}
	return nil
}

// meteredPair makes two sync services, each with a meter and a grant
// check with the quotas given for node 1.
func meteredPair(t *testing.T, quota map[meter.Service]uint64) ([]*testNode, []peer.ID, []*meter.Meter) {
	mn, nodes := newMesh(t, 2)
	hs := mn.Hosts()
	meters := []*meter.Meter{meter.New(hs[0].ID(), time.Hour, time.Now()), meter.New(hs[1].ID(), time.Hour, time.Now())}
	checks := []*quotas{{m: meters[0]}, {m: meters[1], quota: quota}}
	for i, n := range nodes {
		n.svc.Close()
		n.svc = New(hs[i], n.local, n.pol, Config{Meter: meters[i], Allow: checks[i].allow}, nil)
	}
	return nodes, []peer.ID{hs[0].ID(), hs[1].ID()}, meters
}

// TestMeteringBothEnds: both ends of a sync session and of a lookup count
// the same events, bytes and evidence.
func TestMeteringBothEnds(t *testing.T) {
	nodes, ids, meters := meteredPair(t, nil)
	k, _ := nostr.GenerateSecretKey()
	for i := range 5 {
		nodes[1].add(t, signed(t, k, int64(100+i), 1, "held by 1"))
	}
	nodes[0].add(t, signed(t, k, 200, 1, "held by 0"))
	if _, err := nodes[0].svc.SyncWith(context.Background(), ids[1], nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	var got int
	nodes[0].svc.Lookup(context.Background(), []peer.ID{ids[1]}, nostr.Filter{Authors: [][32]byte{k.PubKey()}}, 10, func(*nostr.Event) { got++ })
	s0 := meters[0].Current().Sides()[ids[1]]
	s1 := meters[1].Current().Sides()[ids[0]]
	if s0.Received != s1.Gave || s0.Gave != s1.Received {
		t.Fatalf("the two ends disagree: 0 saw %+v, 1 saw %+v", s0, s1)
	}
	if s1.Gave.Events != 5+uint64(got) || s1.Received.Events != 1 || s1.Gave.StorageBytes != 0 {
		t.Fatalf("1 gave %d events (5 fetched, %d looked up) and received %d (1 pushed); storage %d outside a durable session",
			s1.Gave.Events, got, s1.Received.Events, s1.Gave.StorageBytes)
	}
	e0, e1 := meters[0].Current().Evidence(ids[1]), meters[1].Current().Evidence(ids[0])
	if e0.Received.Digest != e1.Gave.Digest || fmt.Sprint(e0.Received.Sample) != fmt.Sprint(e1.Gave.Sample) || e1.Gave.Events != s1.Gave.Events {
		t.Fatalf("evidence differs: %+v / %+v", e0.Received, e1.Gave)
	}
}

// TestREQOverGrantIsCut: a REQ asking for more events than the grant
// leaves gets the events within the grant, then CLOSED naming it; a
// session's fetch reports the refusal.
func TestREQOverGrantIsCut(t *testing.T) {
	nodes, ids, meters := meteredPair(t, map[meter.Service]uint64{meter.Events: 3})
	k, _ := nostr.GenerateSecretKey()
	for i := range 8 {
		nodes[1].add(t, signed(t, k, int64(100+i), 1, "held by 1"))
	}
	str, err := nodes[0].svc.h.NewStream(context.Background(), ids[1], protocol.ID(ProtocolID))
	if err != nil {
		t.Fatal(err)
	}
	defer str.Close()
	r, w := msgio.NewVarintReaderSize(str, MaxFrameBytes), msgio.NewVarintWriter(str)
	if err := writeFrame(w, "REQ", "x", nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	events := 0
	for {
		typ, parts, err := readFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		if typ == "EVENT" {
			events++
			continue
		}
		if typ != "CLOSED" || len(parts) < 3 || !strings.Contains(string(parts[2]), "over grant abc") {
			t.Fatalf("after %d events: %s %s", events, typ, parts)
		}
		break
	}
	if events != 3 || meters[1].Used(ids[0], meter.Events) != 3 {
		t.Fatalf("%d events served (meter: %d) under a grant of 3", events, meters[1].Used(ids[0], meter.Events))
	}
	// The quota is spent: a session's fetch is refused at once.
	if _, err := nodes[0].svc.SyncWith(context.Background(), ids[1], nostr.Filter{}); err == nil || !strings.Contains(err.Error(), "over grant abc") {
		t.Fatalf("a fetch over the grant: %v", err)
	}
}

// TestDurableStorageMetered: in a durable (shard) session the events each
// side takes in are storage it gives the other, counted at both ends; a
// push over the pusher's storage grant is refused with a false OK naming
// the grant.
func TestDurableStorageMetered(t *testing.T) {
	nodes, ids, meters := meteredPair(t, map[meter.Service]uint64{meter.StorageBytes: 1500})
	k, _ := nostr.GenerateSecretKey()
	shard := mesh.ShardOf(k.PubKey())
	for i := range 4 {
		nodes[1].add(t, signed(t, k, int64(100+i), 1, "held by 1"))
	}
	for i := range 10 {
		nodes[0].add(t, signed(t, k, int64(200+i), 1, strings.Repeat("pushed by 0 ", 20)))
	}
	st, err := nodes[0].svc.SyncShards(context.Background(), ids[1], []int{shard})
	if err != nil {
		t.Fatal(err)
	}
	s0 := meters[0].Current().Sides()[ids[1]]
	s1 := meters[1].Current().Sides()[ids[0]]
	if s0.Received != s1.Gave || s0.Gave != s1.Received {
		t.Fatalf("the two ends disagree: 0 saw %+v, 1 saw %+v", s0, s1)
	}
	// 0 fetched 4 events: storage 0 gave 1, as many bytes as 1 gave.
	if s0.Gave.StorageBytes != s1.Gave.Bytes || s0.Gave.StorageBytes == 0 {
		t.Fatalf("0 stored %d bytes for 1, which gave %d", s0.Gave.StorageBytes, s1.Gave.Bytes)
	}
	// 1 took pushed events until its grant of 1500 storage bytes to 0
	// was spent, then refused.
	if st.Pushed == 0 || st.Refused == 0 || s1.Gave.StorageBytes > 1500 || s1.Gave.StorageBytes == 0 {
		t.Fatalf("pushed %d, refused %d; 1 stored %d bytes for 0 under a grant of 1500", st.Pushed, st.Refused, s1.Gave.StorageBytes)
	}
}
